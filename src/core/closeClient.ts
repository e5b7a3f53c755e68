import type pg from 'pg';

/** How long a clean close may take before the socket is simply destroyed. */
const CLOSE_TIMEOUT_MS = 5_000;

/**
 * Ends a connection of its own (not a pooled one), also one whose connect failed: pg leaves the
 * socket of a connection refused during authentication open until it is ended. A close that
 * takes longer than CLOSE_TIMEOUT_MS (a peer that vanished) destroys the socket instead.
 */
export async function closeClient(client: pg.Client): Promise<void> {
	let timer: NodeJS.Timeout | undefined;
	const ended = client.end().catch(() => undefined);
	const timedOut = new Promise<'timeout'>((resolve) => {
		timer = setTimeout(() => resolve('timeout'), CLOSE_TIMEOUT_MS);
	});
	const outcome = await Promise.race([ended, timedOut]);
	clearTimeout(timer);
	if (outcome === 'timeout') {
		(
			client as unknown as { connection?: { stream?: { destroy(): void } } }
		).connection?.stream?.destroy();
	}
}
