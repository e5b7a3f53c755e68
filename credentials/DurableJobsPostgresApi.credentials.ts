import type { ICredentialType, INodeProperties, Icon } from 'n8n-workflow';

export class DurableJobsPostgresApi implements ICredentialType {
	name = 'durableJobsPostgresApi';

	displayName = 'Durable Jobs Postgres';

	icon: Icon = { light: 'file:durableJobs.svg', dark: 'file:durableJobs.dark.svg' };

	documentationUrl = 'https://www.npmjs.com/package/n8n-nodes-durable-jobs';

	properties: INodeProperties[] = [
		{
			displayName: 'Host',
			name: 'host',
			type: 'string',
			default: 'localhost',
			required: true,
		},
		{
			displayName: 'Port',
			name: 'port',
			type: 'number',
			default: 5432,
			required: true,
		},
		{
			displayName: 'Database',
			name: 'database',
			type: 'string',
			default: 'postgres',
			required: true,
		},
		{
			displayName: 'User',
			name: 'user',
			type: 'string',
			default: 'postgres',
			required: true,
		},
		{
			displayName: 'Password',
			name: 'password',
			type: 'string',
			typeOptions: { password: true },
			default: '',
		},
		{
			displayName: 'SSL',
			name: 'ssl',
			type: 'options',
			options: [
				{
					name: 'Disable',
					value: 'disable',
					description: 'Plain connection (local or private network)',
				},
				{
					name: 'Require',
					value: 'require',
					description: 'Encrypt, without checking the server certificate',
				},
				{
					name: 'Verify',
					value: 'verify',
					description: 'Encrypt and verify the server certificate against a CA',
				},
			],
			default: 'disable',
		},
		{
			displayName: 'CA Certificate',
			name: 'caCertificate',
			type: 'string',
			typeOptions: { password: true, rows: 4 },
			displayOptions: { show: { ssl: ['verify'] } },
			default: '',
			description:
				'PEM certificate of the CA that signed the server certificate. Leave empty to use the system CAs.',
		},
		{
			displayName: 'Schema',
			name: 'schema',
			type: 'string',
			default: 'durable_jobs',
			description: 'Schema that holds the job tables. Lower-case letters, digits and underscores.',
		},
		{
			displayName: 'Max Pool Connections',
			name: 'maxConnections',
			type: 'number',
			typeOptions: { minValue: 1, maxValue: 200 },
			default: 10,
			description: 'Connections this n8n process may open to the database for these nodes',
		},
		{
			displayName: 'Prepared Statements',
			name: 'preparedStatements',
			type: 'boolean',
			default: true,
			description:
				'Whether to prepare the frequent statements once per connection (faster). Turn off when PgBouncer in transaction mode (without prepared-statement support) sits between n8n and PostgreSQL.',
		},
		{
			displayName: 'Durable Leases',
			name: 'durableLeases',
			type: 'boolean',
			default: false,
			description:
				'Whether every lease waits for the database to flush it to disk. Off (faster): if the database server itself crashes, leases from its last fraction of a second can be forgotten and those jobs run again, as after a worker crash; results, enqueues and heartbeats always wait for the flush.',
		},
		{
			displayName: 'Auto-Migrate',
			name: 'autoMigrate',
			type: 'boolean',
			default: true,
			description:
				'Whether to create and upgrade the schema on first use. Turn off when the database role may not run DDL; then apply the migrations as a role that may, where n8n runs, with the command of the installed version: cd ~/.n8n/nodes && DATABASE_URL=postgres://… node node_modules/n8n-nodes-durable-jobs/dist/src/cli.js migrate --schema <this Schema>. With it off, Test shows the whole command while migrations are missing.',
		},
	];
}
