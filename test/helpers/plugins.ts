/** Small plugins for testing the core: an event journal shows setup and close order. */
import { z } from 'zod';
import { PUBLIC } from '../../core/api.ts';
import { WharfError } from '../../core/errors.ts';
import { definePlugin } from '../../core/plugin.ts';
import type { AnyPlugin } from '../../core/config.ts';

/** A plugin that records its setup and close in `journal`, optionally failing in setup. */
export function journalPlugin(name: string, journal: string[], options: { dependsOn?: string[]; failSetup?: boolean } = {}): AnyPlugin {
  return definePlugin({
    name,
    description: `test plugin ${name}`,
    dependsOn: options.dependsOn,
    config: z.strictObject({ size: z.int().min(1).default(1).describe('A number.') }),
    migrations: [
      {
        id: '001-table',
        up(db) {
          db.exec(`CREATE TABLE ${name}_things (id INTEGER PRIMARY KEY)`);
        },
      },
    ],
    setup() {
      if (options.failSetup) throw new Error(`${name} cannot reach its store`);
      journal.push(`setup ${name}`);
      return {
        close() {
          journal.push(`close ${name}`);
        },
      };
    },
  });
}

/** Routes in both envelopes that answer or throw whatever a test asks for. */
export const probePlugin: AnyPlugin = definePlugin({
  name: 'probe',
  description: 'test routes in each envelope',
  config: z.strictObject({}),
  setup({ api }) {
    const plain = api.group({ prefixes: ['/plain'], envelope: 'plain' });
    const messaging = api.group({ prefixes: ['/msg'], envelope: 'messaging' });
    for (const [group, base] of [
      [plain, '/plain'],
      [messaging, '/msg'],
    ] as const) {
      const route = (method: 'GET' | 'POST', path: string, handler: Parameters<typeof group.route>[0]['handler']) =>
        group.route({ method, path: `${base}${path}`, summary: path, tag: 'Probe', auth: PUBLIC, handler });
      route('POST', '/echo', (ctx) => {
        ctx.body = { got: ctx.request.body ?? null };
      });
      route('GET', '/boom', () => {
        throw new Error('secret database password is hunter2');
      });
      route('GET', '/unavailable', () => {
        throw new WharfError('unavailable', 'Storage is unreachable', { retryAfter: 5 });
      });
      route('GET', '/invalid', () => {
        throw new WharfError('validation_failed', 'The given data was invalid.', { fields: { to: ['The to field is required.'] } });
      });
      route('GET', '/missing', () => {
        throw new WharfError('not_found', 'Session not found');
      });
      route('GET', '/limited', () => {
        throw new WharfError('rate_limited', 'Too many requests', { retryAfter: 7 });
      });
    }
    return { routes: [plain, messaging] };
  },
});
