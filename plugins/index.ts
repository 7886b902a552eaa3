/**
 * The one static list of built-in plugins. A single executable cannot load plugins by name at
 * run time, so the binary is this list: to add a plugin, import it here and rebuild.
 */
import type { AnyPlugin } from '../core/config.ts';
import example from './example/index.ts';
import identity from './identity/index.ts';

export const builtinPlugins: readonly AnyPlugin[] = [identity, example];
