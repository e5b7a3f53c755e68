import { createConnection, createServer, type Server, type Socket } from 'node:net';

export interface TcpProxy {
	host: string;
	port: number;
	/** Drops every open connection and refuses new ones (the target looks down). */
	cut(): Promise<void>;
	/** Accepts connections again. */
	restore(): Promise<void>;
	close(): Promise<void>;
}

/**
 * A loopback TCP forwarder in front of a server (PostgreSQL), so a test can make that server
 * unreachable for one client (n8n's job credential) while everything else keeps using it.
 */
export async function startTcpProxy(target: { host: string; port: number }): Promise<TcpProxy> {
	const sockets = new Set<Socket>();
	let server: Server | undefined;
	let port = 0;

	const listen = async (): Promise<void> => {
		server = createServer((client) => {
			const upstream = createConnection(target);
			sockets.add(client);
			sockets.add(upstream);
			const drop = () => {
				client.destroy();
				upstream.destroy();
				sockets.delete(client);
				sockets.delete(upstream);
			};
			client.on('error', drop);
			upstream.on('error', drop);
			client.on('close', drop);
			upstream.on('close', drop);
			client.pipe(upstream);
			upstream.pipe(client);
		});
		await new Promise<void>((resolve, reject) => {
			server!.once('error', reject);
			server!.listen(port, '127.0.0.1', () => resolve());
		});
		const address = server.address();
		port = typeof address === 'object' && address ? address.port : port;
	};

	const stop = async (): Promise<void> => {
		for (const socket of sockets) socket.destroy();
		sockets.clear();
		if (server) {
			const closing = server;
			server = undefined;
			await new Promise<void>((resolve) => closing.close(() => resolve()));
		}
	};

	await listen();
	return {
		host: '127.0.0.1',
		get port() {
			return port;
		},
		cut: stop,
		restore: async () => {
			if (!server) await listen();
		},
		close: stop,
	};
}
