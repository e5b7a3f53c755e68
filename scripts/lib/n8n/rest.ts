/**
 * n8n's internal REST API (`/rest/…`) as its editor calls it in n8n 2.40: set up the owner, log
 * in (a session cookie bound to a `browser-id` header), create credentials, create, update,
 * publish and unpublish workflows. Every answer is unwrapped from n8n's `{ data }` envelope; a
 * status other than 2xx throws with n8n's message.
 */

export interface OwnerLogin {
	email: string;
	password: string;
	firstName: string;
	lastName: string;
}

/** A workflow as `POST /rest/workflows` answers it (the fields used here). */
export interface SavedWorkflow {
	id: string;
	name: string;
	versionId: string;
	activeVersionId: string | null;
	nodes: Array<{
		id: string;
		name: string;
		type: string;
		parameters: Record<string, unknown>;
		webhookId?: string;
		credentials?: Record<string, { id: string; name: string }>;
	}>;
}

export class N8nRestClient {
	private cookie = '';
	/** The editor sends one per browser; the session cookie is only valid with the same one. */
	private readonly browserId = `durable-jobs-e2e-${Date.now()}`;

	constructor(private readonly baseUrl: string) {}

	async call<T>(method: string, path: string, body?: unknown): Promise<T> {
		const response = await fetch(`${this.baseUrl}/rest${path}`, {
			method,
			headers: {
				'browser-id': this.browserId,
				...(this.cookie ? { cookie: this.cookie } : {}),
				...(body === undefined ? {} : { 'content-type': 'application/json' }),
			},
			body: body === undefined ? undefined : JSON.stringify(body),
		});
		const setCookie = response.headers.getSetCookie().find((c) => c.startsWith('n8n-auth='));
		if (setCookie) this.cookie = setCookie.split(';')[0];
		const text = await response.text();
		if (!response.ok)
			throw new Error(`n8n ${method} /rest${path} answered ${response.status}: ${text}`);
		const parsed = text ? (JSON.parse(text) as { data?: T }) : {};
		return parsed.data as T;
	}

	/** What the editor's first visit does: create the owner account (it also logs in). */
	async setupOwner(owner: OwnerLogin): Promise<void> {
		await this.call('POST', '/owner/setup', owner);
	}

	async login(email: string, password: string): Promise<void> {
		await this.call('POST', '/login', { emailOrLdapLoginId: email, password });
	}

	/** *Credentials → New*: n8n gives the credential an id of its own. */
	async createCredential(credential: {
		name: string;
		type: string;
		data: Record<string, unknown>;
	}): Promise<{ id: string; name: string; type: string }> {
		return await this.call('POST', '/credentials', credential);
	}

	/** Saving a new workflow in the editor. */
	async createWorkflow(workflow: Record<string, unknown>): Promise<SavedWorkflow> {
		return await this.call('POST', '/workflows', workflow);
	}

	/** Saving changes to a workflow in the editor. */
	async updateWorkflow(id: string, changes: Record<string, unknown>): Promise<SavedWorkflow> {
		return await this.call('PATCH', `/workflows/${id}`, changes);
	}

	async getWorkflow(id: string): Promise<SavedWorkflow> {
		return await this.call('GET', `/workflows/${id}`);
	}

	/** *Publish* in the editor: publishes the saved version. */
	async publishWorkflow(id: string, versionId: string): Promise<SavedWorkflow> {
		return await this.call('POST', `/workflows/${id}/activate`, { versionId });
	}

	async unpublishWorkflow(id: string): Promise<SavedWorkflow> {
		return await this.call('POST', `/workflows/${id}/deactivate`, {});
	}

	/** *Archive* in the editor (what deleting a workflow does first): it is unpublished too. */
	async archiveWorkflow(id: string): Promise<SavedWorkflow> {
		return await this.call('POST', `/workflows/${id}/archive`, {});
	}

	async unarchiveWorkflow(id: string): Promise<SavedWorkflow> {
		return await this.call('POST', `/workflows/${id}/unarchive`, {});
	}
}
