/**
 * The one static list of built-in plugins. A single executable cannot load plugins by name at
 * run time, so the binary is this list: to add a plugin, import it here and rebuild.
 */
import type { AnyPlugin } from '../core/config.ts';
import dashboard from './dashboard/index.ts';
import example from './example/index.ts';
import identity from './identity/index.ts';
import rateLimit from './rate_limit/index.ts';
import sessions from './sessions/index.ts';
import storage from './storage/index.ts';
import tokens from './tokens/index.ts';
import webhooks from './webhooks/index.ts';

export const builtinPlugins: readonly AnyPlugin[] = [identity, sessions, webhooks, storage, tokens, example, rateLimit, dashboard];
