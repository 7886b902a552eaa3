/**
 * The example plugin: a complete, tiny plugin that shows every part of the contract (config,
 * a migration, routes, a service, a command, close), its store on the data layer so it runs on
 * SQLite and PostgreSQL alike. Disabled unless `[plugins.example]` says `enabled = true`; the
 * tests load it.
 */
import { z } from 'zod';
import { PUBLIC } from '../../core/api.ts';
import { definePlugin } from '../../core/plugin.ts';

export interface ExampleService {
  /** How many greetings were served to `name`. */
  visits(name: string): Promise<number>;
}

declare module '../../core/plugin.ts' {
  interface Services {
    example: ExampleService;
  }
}

const config = z.strictObject({
  greeting: z.string().min(1).default('Hello').describe('The word the example plugin greets with.'),
});

export default definePlugin({
  name: 'example',
  description: 'A tiny plugin that shows the plugin contract: GET /example/hello.',
  enabledByDefault: false,
  config,
  engines: ['sqlite', 'postgres'],
  // SQL both engines read alike; `{ sqlite, postgres }` when they differ, `apply(db)` for code.
  migrations: [{ id: '001-create-visits', sql: 'CREATE TABLE example_visits (name TEXT PRIMARY KEY, count INTEGER NOT NULL)' }],
  commands: [
    {
      group: 'example',
      command: 'visits <name>',
      describe: 'Print how many greetings a name has had',
      async handler(args, ctx) {
        const { data, close } = await ctx.open();
        try {
          const visits = (await data.value<number>('SELECT count FROM example_visits WHERE name = ?', [String(args.name)])) ?? 0;
          ctx.print(String(visits), { name: args.name, visits });
        } finally {
          await close();
        }
      },
    },
  ],
  setup({ config, data, log, api }) {
    const name = z.string().trim().min(1, 'must not be empty').max(100);
    const greeting = z.object({ message: z.string(), visits: z.int() });
    const greet = async (who: string) => {
      // One statement, atomic on both engines (the table's own name qualifies the column on PostgreSQL).
      const visits = await data.value<number>(
        'INSERT INTO example_visits (name, count) VALUES (?, 1) ON CONFLICT (name) DO UPDATE SET count = example_visits.count + 1 RETURNING count',
        [who],
      );
      return { message: `${config.greeting}, ${who}!`, visits: visits! };
    };
    // One group per URL prefix: 404s and 405s under /example answer in its envelope ({error}).
    const group = api.group({ prefixes: ['/example'], envelope: 'plain' });
    group.route({
      method: 'GET',
      path: '/example/hello',
      summary: 'Greet a name and count the visit',
      tag: 'Example',
      auth: PUBLIC,
      query: z.object({ name }),
      success: { schema: greeting },
      async handler(ctx, { query }) {
        ctx.body = await greet(query.name);
      },
    });
    group.route({
      method: 'POST',
      path: '/example/hello',
      summary: 'Greet a name sent in the body',
      tag: 'Example',
      auth: PUBLIC,
      body: z.object({ name }),
      success: { status: 201, schema: greeting },
      async handler(ctx, { body }) {
        ctx.body = await greet(body.name);
        ctx.status = 201;
      },
    });
    log.debug('example plugin ready');
    return {
      service: {
        visits: async (name: string) => (await data.value<number>('SELECT count FROM example_visits WHERE name = ?', [name])) ?? 0,
      },
      routes: [group],
      close() {
        log.debug('example plugin closed');
      },
    };
  },
});
