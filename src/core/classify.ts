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
export const RETRYABLE_STATUS_RANGE = { min: 400, max: 499 } as const;
