/** Names the rehearsal relies on in the bundled workflows and the stand-ins. */
export const DISPATCHER_ID = 'DjDispatcher0001';
export const WORKER_ID = 'DjWorker00000001';
/**
 * The workflow whose executions run the jobs: the Dispatcher starts from Job Trigger and runs
 * the Worker's steps itself, one execution per job. (The Worker workflow serves the polling
 * Dispatcher template, which the rehearsal does not publish.)
 */
export const JOB_WORKFLOW_ID = DISPATCHER_ID;
/** Backstop sweep of the Dispatcher's Job Trigger during the rehearsal (bundled: 30 s). */
export const REHEARSAL_BACKSTOP_SECONDS = 5;
export const RECEIVER_ID = 'DjReceiver000001';
/** The Worker's heartbeat right before the CRM call, and the checkpoint it records. */
export const CHECKPOINT_NODE = 'Checkpoint: CRM request';
export const CRM_CHECKPOINT = 'crm_request';
export const QUEUE = 'documents';
/** Header the rehearsal adds to the Worker's AI and CRM requests, so journals name the attempt. */
export const ATTEMPT_HEADER = 'X-Attempt-Id';
/** The reconciliation report's `external_call` with a checkpoint, and without one. */
export const EXTERNAL_CALL_MAY_HAVE_HAPPENED = 'may have happened';
export const EXTERNAL_CALL_NOT_MADE = 'not made';

export type Log = (line: string) => void;
export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
