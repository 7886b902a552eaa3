/**
 * `wharf-plugin`: what a plugin built outside this repository compiles against. The build makes
 * it a package (`dist/wharf-plugin/`: this module bundled, and the declarations of the contract's
 * types), and `wharf plugins new` writes it into each new plugin project.
 *
 * Its only runtime code is `definePlugin`, which stamps the contract version the plugin was
 * built against. Everything else a plugin uses at run time (zod's `z`, `WharfError`, `PUBLIC`)
 * comes from the core that loads it, through the kit `define` receives, so that schemas and
 * errors are the core's own instances.
 *
 * ```ts
 * import { definePlugin } from 'wharf-plugin';
 * export default definePlugin(({ plugin, z }) => plugin({ name: 'hello', config: z.strictObject({}), ... }));
 * ```
 */
import { type ExternalPlugin, PLUGIN_CONTRACT, type Plugin, type PluginKit } from './plugin.ts';

// The core's additions to Koa's context (ctx.log, ctx.request.body, ctx.state.requestId) come with http.ts.
export type { contentDisposition } from './http.ts';
export type { Credential, GroupOptions, Method, RouteGroup, RouteInput, RouteSpec } from './api.ts';
export type { AuthRegistry, Principal, PrincipalKind, PrincipalKinds } from './auth.ts';
export type { CoreConfig } from './config.ts';
export type { ConstraintError, Database, DatabaseEngine, Db, Params, TransactionOptions } from './db.ts';
export type { Envelope, ErrorCode, WharfError, WharfErrorOptions } from './errors.ts';
export type { Keys } from './keys.ts';
export type { Logger } from './logger.ts';
export type {
  CommandContext,
  ConfigProblem,
  ExternalPlugin,
  MiddlewarePriority,
  Migration,
  Plugin,
  PluginCommand,
  PluginContext,
  PluginInstance,
  PluginKit,
  PluginMiddleware,
  Services,
} from './plugin.ts';

/** The contract version this package describes; `definePlugin` stamps it on the plugin. */
export const CONTRACT: string = PLUGIN_CONTRACT;

/**
 * Declares a plugin for `[plugins] dir`: `define` gets the loading core's kit and returns the
 * declaration (made with the kit's `plugin`, for a config type inferred from the schema).
 */
// biome-ignore lint/suspicious/noExplicitAny: a plugin of any config type.
export function definePlugin(define: (kit: PluginKit) => Plugin<any, any>): ExternalPlugin {
  return { contract: CONTRACT, define };
}
