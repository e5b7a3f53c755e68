import type { WorkflowJson } from '../../scripts/lib/environment';

/**
 * The receiver (01) refuses a callback_url on a loopback address, and the stand-in callback
 * receiver listens on 127.0.0.1: tests that want callbacks delivered list it in the receiver's
 * Config → allowed_private_callback_hosts, as an operator lists an internal receiver.
 */
export function allowLoopbackCallbacks(workflows: WorkflowJson[]): void {
	const receiver = workflows.find((workflow) => workflow.id === 'DjReceiver000001');
	const config = receiver?.nodes.find((node) => node.name === 'Config');
	const assignment = (
		config?.parameters.assignments as
			| { assignments: Array<{ name: string; value: unknown }> }
			| undefined
	)?.assignments.find((entry) => entry.name === 'allowed_private_callback_hosts');
	if (assignment) assignment.value = '127.0.0.1';
}
