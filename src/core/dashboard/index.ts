/**
 * The jobs dashboard: what the page shows (queues, a list of jobs, one job's story) and the two
 * writes it offers (requeue failed jobs, cancel queued jobs). Every answer is plain JSON data
 * (timestamps as ISO strings); JobStore exposes these through methods that only delegate here.
 * Statements: sql/dashboard.ts.
 */
export * from './overview';
export * from './list';
export * from './story';
export * from './actions';
export type * from './contract';
