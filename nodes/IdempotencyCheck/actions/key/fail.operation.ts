import { settleOperation } from './settle';

/** Marks the claim failed, so a retry of the event is processed again (as a replay). */
export const { description, execute } = settleOperation('fail', [
	{ displayName: 'Error Message', name: 'errorMessage', type: 'string', default: '' },
]);
