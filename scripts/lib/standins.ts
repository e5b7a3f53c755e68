/**
 * Stand-in HTTP services for the end-to-end tests and the demo: an AI extraction endpoint, a CRM
 * that journals every request with its Idempotency-Key, and a callback receiver. Plain node:http,
 * bound to 127.0.0.1 on a free port. Each can be driven from TypeScript and over HTTP
 * (`POST /__control`), so a workflow under test and the test itself see the same state.
 *
 * AI — `startAiStandin({ latencyMs })`
 *   POST /extract  {document, document_id?|source_document_id?|id?|key?, ...}
 *     → 200 {fields: {name, email, amount}, model: 'stand-in', source_document_id, call}
 *   Failure injection per key (the document id, else the document text), consumed in order:
 *     ai.script('doc-1', [500, 500])            two 500s, then success
 *     ai.script('doc-2', [{ status: 429, retryAfter: 1 }])
 *     ai.script('doc-3', [{ hang: true }])      never answers (client timeout path)
 *     ai.always('doc-4', 400)                   every call answers 400
 *     ai.script('*', [503])                     applies to any key without its own script
 *   Also as start options: startAiStandin({ scripts: { 'doc-1': [500, 500] }, always: { 'doc-4': 400 } }).
 *   Over HTTP: POST /__control {latencyMs?, script?: {key, steps}, scripts?: {key: steps},
 *   always?: {key, step}, reset?: true}
 *   Observation: ai.callCount(key), ai.calls (every request), GET /__calls.
 *
 * CRM — `startCrmStandin({ honourKeys: true, delayMs: 0 })`
 *   POST /records (header Idempotency-Key, JSON body) → 201 {id, ...body}; with honourKeys a
 *   repeated key answers 200 with the first record (header Idempotent-Replayed: true) and creates
 *   nothing. `delayMs` delays the answer AFTER the record is stored ("request sent, response not
 *   received" when the caller dies meanwhile). Per call, consumed in order:
 *     crm.answerDelays('doc-1', [27_000, 0])   the first request for doc-1 is answered after 27 s
 *                                               (its record stored at once), the second at once
 *   (matched by Idempotency-Key, else by the body's source_document_id; replaces `delayMs` for
 *   those requests). `down` answers 503 to everything; `script` queues statuses for the next
 *   requests. GET /records, GET /records/:id.
 *   Journal of EVERY request: crm.journal, GET /__journal. Control: POST /__control
 *   {honourKeys?, delayMs?, down?, script?: steps, answerDelays?: {match, delaysMs}, reset?: true}.
 *
 * Callbacks — `startCallbackReceiver()`
 *   Any POST/PUT on any path is recorded with headers and the raw body (needed to verify Standard
 *   Webhooks signatures); answers `status` (default 200) or the next scripted status.
 *   receiver.received, receiver.waitFor(pred), GET /__received, POST /__control {status?, script?, reset?}.
 *
 * `startStandins()` starts all three; `waitFor(fn)` polls any condition.
 */
import { startAiStandin, type AiStandin, type AiStandinOptions } from './standins/ai';
import { startCallbackReceiver, type CallbackReceiver } from './standins/callbacks';
import { startCrmStandin, type CrmStandin } from './standins/crm';

export { extractFields, startAiStandin } from './standins/ai';
export type { AiCall, AiStandin, AiStandinOptions, ExtractedFields } from './standins/ai';
export { startCallbackReceiver } from './standins/callbacks';
export type { CallbackReceiver, ReceivedCallback } from './standins/callbacks';
export { startCrmStandin } from './standins/crm';
export type { CrmJournalEntry, CrmRecord, CrmStandin } from './standins/crm';
export { waitFor, type FailureStep } from './standins/http';

export interface Standins {
	ai: AiStandin;
	crm: CrmStandin;
	callbacks: CallbackReceiver;
	close(): Promise<void>;
}

export async function startStandins(
	opts: {
		ai?: AiStandinOptions;
		crm?: Parameters<typeof startCrmStandin>[0];
		callbacks?: Parameters<typeof startCallbackReceiver>[0];
	} = {},
): Promise<Standins> {
	const ai = await startAiStandin(opts.ai);
	const crm = await startCrmStandin(opts.crm);
	const callbacks = await startCallbackReceiver(opts.callbacks);
	return {
		ai,
		crm,
		callbacks,
		close: async () => {
			await Promise.all([ai.close(), crm.close(), callbacks.close()]);
		},
	};
}
