/**
 * The example plugin: a complete, tiny plugin that shows every part of the contract (config,
 * a migration, routes, a service, a command, close). Disabled unless `[plugins.example]`
 * says `enabled = true`; the tests load it.
 */
import Router from '@koa/router';
import { z } from 'zod';
import { WharfError } from '../../core/errors.ts';
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
          const row = db.prepare('SELECT count FROM example_visits WHERE name = ?').get(String(args.name)) as
            | { count: number }
            | undefined;
          ctx.print(String(row?.count ?? 0), { name: args.name, visits: row?.count ?? 0 });
        } finally {
          close();
        }
      },
    },
  ],
  setup({ config, db, log }) {
    const record = db.prepare(
      'INSERT INTO example_visits (name, count) VALUES (?, 1) ON CONFLICT (name) DO UPDATE SET count = count + 1 RETURNING count',
    );
    const read = db.prepare('SELECT count FROM example_visits WHERE name = ?');
    const router = new Router({ prefix: '/example' });
    router.get('/hello', (ctx) => {
      const name = typeof ctx.query.name === 'string' ? ctx.query.name.trim() : '';
      if (!name) throw new WharfError('bad_request', 'name is required');
      const { count } = record.get(name) as { count: number };
      ctx.body = { message: `${config.greeting}, ${name}!`, visits: count };
    });
    router.post('/hello', (ctx) => {
      const body = ctx.request.body as { name?: unknown } | undefined;
      if (typeof body?.name !== 'string' || !body.name) throw new WharfError('bad_request', 'name is required');
      const { count } = record.get(body.name) as { count: number };
      ctx.status = 201;
      ctx.body = { message: `${config.greeting}, ${body.name}!`, visits: count };
    });
    log.debug('example plugin ready');
    return {
      service: {
        visits: (name: string) => (read.get(name) as { count: number } | undefined)?.count ?? 0,
      },
      routes: [{ prefixes: ['/example'], envelope: 'plain', router }],
      close() {
        log.debug('example plugin closed');
      },
    };
  },
});
