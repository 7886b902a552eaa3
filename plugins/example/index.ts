/**
 * The example plugin: a complete, tiny plugin that shows every part of the contract (config,
 * a migration, routes, a service, a command, close). Disabled unless `[plugins.example]`
 * says `enabled = true`; the tests load it.
 */
import { z } from 'zod';
import { PUBLIC } from '../../core/api.ts';
import { definePlugin } from '../../core/plugin.ts';

export interface ExampleService {
  /** How many greetings were served to `name`. */
  visits(name: string): number;
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
  migrations: [
    {
      id: '001-create-visits',
      up(db) {
        db.exec('CREATE TABLE example_visits (name TEXT PRIMARY KEY, count INTEGER NOT NULL)');
      },
    },
  ],
  commands: [
    {
      group: 'example',
      command: 'visits <name>',
      describe: 'Print how many greetings a name has had',
      async handler(args, ctx) {
        const { db, close } = await ctx.open();
        try {
          const row = db.prepare('SELECT count FROM example_visits WHERE name = ?').get(String(args.name)) as { count: number } | undefined;
          ctx.print(String(row?.count ?? 0), { name: args.name, visits: row?.count ?? 0 });
        } finally {
          close();
        }
      },
    },
  ],
  setup({ config, db, log, api }) {
    const record = db.prepare('INSERT INTO example_visits (name, count) VALUES (?, 1) ON CONFLICT (name) DO UPDATE SET count = count + 1 RETURNING count');
    const read = db.prepare('SELECT count FROM example_visits WHERE name = ?');
    const name = z.string().trim().min(1, 'must not be empty').max(100);
    const greeting = z.object({ message: z.string(), visits: z.int() });
    const greet = (who: string) => ({ message: `${config.greeting}, ${who}!`, visits: (record.get(who) as { count: number }).count });
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
      handler(ctx, { query }) {
        ctx.body = greet(query.name);
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
      handler(ctx, { body }) {
        ctx.status = 201;
        ctx.body = greet(body.name);
      },
    });
    log.debug('example plugin ready');
    return {
      service: {
        visits: (name: string) => (read.get(name) as { count: number } | undefined)?.count ?? 0,
      },
      routes: [group],
      close() {
        log.debug('example plugin closed');
      },
    };
  },
});
