import { settleOperation } from './settle';

/** Stores the result with the key: later items with the key go to Duplicate and carry it. */
export const { description, execute } = settleOperation('complete', [
	{
		displayName: 'Result',
		name: 'result',
		type: 'json',
		default: '={{ $json }}',
		description: 'Stored with the key; duplicates of the event carry it',
	},
]);
