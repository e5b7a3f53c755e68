import type { CompleteOutcome, ErrorClass } from './types';

export interface Classification {
	outcome: CompleteOutcome;
	errorClass: ErrorClass | null;
	errorCode: string | null;
}

/**
 * What an HTTP answer means for a job: 2xx succeeded; 408, 425, 429, 5xx and no answer at all
 * (timeout, connection refused) are transient → retry; any other 4xx is a contract error that
 * retrying cannot fix → failed, needs_mapping; anything else needs a person. `alsoRetry` names
 * more statuses that are transient for this call: 409 for a request with an Idempotency-Key,
 * which a server answers while an earlier request with the same key is still in progress.
 */
export function classifyHttpStatus(
	status: number | null | undefined,
	alsoRetry: readonly number[] = [],
): Classification {
	if (status === null || status === undefined || !Number.isFinite(status) || status === 0) {
		return { outcome: 'retry', errorClass: 'retryable', errorCode: 'http_no_response' };
	}
	if (status >= 200 && status < 300)
		return { outcome: 'succeeded', errorClass: null, errorCode: null };
	if (
		status === 408 ||
		status === 425 ||
		status === 429 ||
		status >= 500 ||
		alsoRetry.includes(status)
	) {
		return { outcome: 'retry', errorClass: 'retryable', errorCode: `http_${status}` };
	}
	if (status >= 400 && status < 500)
		return { outcome: 'failed', errorClass: 'needs_mapping', errorCode: `http_${status}` };
	return { outcome: 'failed', errorClass: 'needs_manual_review', errorCode: `http_${status}` };
}

/** The statuses `classifyHttpStatus` may be told to retry as well: the 4xx. */
export const ALSO_RETRY_STATUS_RANGE = { min: 400, max: 499 } as const;

/** IMF-fixdate, RFC 850 and asctime (RFC 9110, section 5.6.7). */
const HTTP_DATE = [
	/^[A-Z][a-z]{2}, \d{2} [A-Z][a-z]{2} \d{4} \d{2}:\d{2}:\d{2} GMT$/,
	/^[A-Z][a-z]+, \d{2}-[A-Z][a-z]{2}-\d{2} \d{2}:\d{2}:\d{2} GMT$/,
	/^[A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]\d \d{2}:\d{2}:\d{2} \d{4}$/,
];

/**
 * The wait a Retry-After header asks for, in ms (RFC 9110: delay-seconds, or an HTTP date whose
 * distance from `now` is rounded up to whole seconds, 0 when it has passed), or undefined when
 * there is none or it cannot be read, so that the backoff applies.
 */
export function retryAfterMs(header: unknown, now = Date.now()): number | undefined {
	const value = Array.isArray(header) ? (header as unknown[])[0] : header;
	if (typeof value === 'number')
		return Number.isInteger(value) && value >= 0 ? value * 1000 : undefined;
	if (typeof value !== 'string') return undefined;
	const text = value.trim();
	if (/^\d+$/.test(text)) return Number(text) * 1000;
	// Only the three forms of an HTTP date: Date.parse reads far more ("1.5", "-3", "in 3000").
	if (!HTTP_DATE.some((form) => form.test(text))) return undefined;
	// asctime names no zone; an HTTP date is always GMT, not the machine's local time.
	const at = Date.parse(text.endsWith(' GMT') ? text : `${text} GMT`);
	if (Number.isNaN(at)) return undefined;
	return Math.max(0, Math.ceil((at - now) / 1000) * 1000);
}
