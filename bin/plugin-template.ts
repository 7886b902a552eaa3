/**
 * `wharf plugins new NAME`: a plugin project that builds outside this repository and loads from
 * `[plugins] dir`. It carries the `wharf-plugin` package of the wharf that wrote it (types and
 * `definePlugin`), so it type-checks against exactly the contract that will load it; a route, a
 * migration, a command, a config schema and a `validate` rule show every part; `npm run build`
 * type-checks with tsc and bundles with esbuild into one ES module, `dist/<name>.mjs`.
 */
import fs from 'node:fs';
import path from 'node:path';
import pkg from '../package.json' with { type: 'json' };
import { PLUGIN_CONTRACT } from '../core/plugin.ts';
import { seaModule } from '../core/native.ts';

/** The asset name of the wharf-plugin package in the binary (a JSON object: relative path -> text). */
export const SDK_ASSET = 'wharf-plugin.json';

/** The wharf-plugin package: from the binary, or made from this checkout's sources. */
export async function sdkFiles(): Promise<Record<string, string>> {
  const sea = seaModule();
  if (sea) return JSON.parse(sea.getAsset(SDK_ASSET, 'utf8')) as Record<string, string>;
  // From source: build/sdk.ts needs tsc and esbuild, which only a checkout has. The specifier is
  // computed so the bundle does not take the builder (and esbuild) in.
  const builder = new URL('../build/sdk.ts', import.meta.url).href;
  const { sdkFiles: make } = (await import(builder)) as { sdkFiles(): Promise<Record<string, string>> };
  return make();
}

/** Versions the project builds with: the ones this wharf is built and tested with. */
function devDependencies(): Record<string, string> {
  const dev: Record<string, string> = { ...pkg.devDependencies };
  const pick = (name: string) => dev[name] ?? (pkg.dependencies as Record<string, string>)[name] ?? 'latest';
  return {
    '@types/better-sqlite3': pick('@types/better-sqlite3'),
    '@types/koa': pick('@types/koa'),
    '@types/node': pick('@types/node'),
    esbuild: pick('esbuild'),
    typescript: pick('typescript'),
    'wharf-plugin': 'file:./wharf-plugin',
    // Types only: at run time the plugin uses the kit's z, the instance of the wharf that loads it.
    zod: pick('zod'),
  };
}

/** The project's files, relative path -> content. */
export function templateFiles(name: string, sdk: Record<string, string>): Record<string, string> {
  const files: Record<string, string> = {};
  for (const [file, text] of Object.entries(sdk)) files[`wharf-plugin/${file}`] = text;
  files['package.json'] = `${JSON.stringify(
    {
      name: `wharf-plugin-${name.replace(/_/g, '-')}`,
      version: '0.1.0',
      private: true,
      description: `The ${name} plugin for Wharf (plugin contract ${PLUGIN_CONTRACT}).`,
      type: 'module',
      main: `dist/${name}.mjs`,
      scripts: { build: 'tsc -p . && node build.mjs', check: 'tsc -p .' },
      devDependencies: devDependencies(),
    },
    null,
    2,
  )}\n`;
  files['tsconfig.json'] = `${JSON.stringify(
    {
      compilerOptions: {
        target: 'es2022',
        module: 'nodenext',
        moduleResolution: 'nodenext',
        strict: true,
        // wharf-plugin's declarations name types of packages the plugin need not install (pino,
        // prom-client, yargs): without them those types are loose, not errors.
        skipLibCheck: true,
        noEmit: true,
        types: ['node'],
      },
      include: ['src'],
    },
    null,
    2,
  )}\n`;
  files['build.mjs'] = BUILD_SCRIPT.replaceAll('__NAME__', name);
  files['src/index.ts'] = INDEX_TS.replaceAll('__NAME__', name);
  files['README.md'] = README.replaceAll('__NAME__', name).replaceAll('__CONTRACT__', PLUGIN_CONTRACT).replaceAll('__VERSION__', pkg.version);
  files['.gitignore'] = 'node_modules/\ndist/\n';
  return files;
}

/** Writes a new plugin project into `dir`, which must not exist or be empty. Returns the files written. */
export async function scaffoldPlugin(name: string, dir: string): Promise<string[]> {
  if (fs.existsSync(dir) && fs.readdirSync(dir).length > 0) throw new Error(`${dir} exists and is not empty`);
  const files = templateFiles(name, await sdkFiles());
  for (const [file, text] of Object.entries(files)) {
    const target = path.join(dir, file);
    fs.mkdirSync(path.dirname(target), { recursive: true });
    fs.writeFileSync(target, text);
  }
  return Object.keys(files);
}

const BUILD_SCRIPT = `// Bundles src/index.ts and what it imports into dist/__NAME__.mjs, one ES module for Wharf's
// [plugins] dir. Node's builtins stay imports; every other package is bundled in.
import { build } from 'esbuild';

const result = await build({
  entryPoints: ['src/index.ts'],
  outfile: 'dist/__NAME__.mjs',
  bundle: true,
  platform: 'node',
  format: 'esm',
  target: 'node24',
  metafile: true,
  logLevel: 'warning',
  // A bundled CommonJS package may require() Node builtins: give it a require that can.
  banner: { js: "import { createRequire as __wharfRequire } from 'node:module'; const require = __wharfRequire(import.meta.url);" },
});

// The plugin must use the kit's z, the zod of the wharf that loads it: a schema made with a
// bundled copy of zod is one the core's validation and OpenAPI document do not understand.
const zodCopies = Object.keys(result.metafile.inputs).filter((file) => /(^|[\\\\/])node_modules[\\\\/]zod[\\\\/]/.test(file));
if (zodCopies.length) {
  console.error("build: src imports zod at run time; use the kit's z instead: definePlugin(({ plugin, z }) => plugin({...}))");
  process.exit(1);
}
console.log('built dist/__NAME__.mjs');
`;

const INDEX_TS = `/**
 * The __NAME__ plugin: greets a name and counts the greetings. It shows every part of a Wharf
 * plugin: a config schema and a rule across its keys (validate), a migration, routes, a service,
 * a timer and a command.
 *
 * Everything it uses at run time comes from the kit \`define\` receives (z, WharfError, PUBLIC),
 * so its schemas and errors are the loading wharf's own; imports from 'wharf-plugin' and 'zod'
 * are for types (and definePlugin, which stamps the contract version).
 */
import { definePlugin } from 'wharf-plugin';

export interface GreetingService {
  /** How many greetings \`name\` has had. */
  count(name: string): Promise<number>;
}

export default definePlugin(({ plugin, z, PUBLIC, WharfError }) =>
  plugin({
    name: '__NAME__',
    description: 'Greets a name and counts the greetings: GET /__NAME__/greet?name=Ada.',
    // Its section is [plugins.__NAME__]; every key has a default and a description.
    config: z.strictObject({
      greeting: z.string().min(1).default('Hello').describe('The word it greets with.'),
      min_name_length: z.int().min(1).default(1).describe('Shortest name accepted, in characters.'),
      max_name_length: z.int().min(1).max(1000).default(100).describe('Longest name accepted, in characters.'),
    }),
    // Rules across keys: \`wharf config check\` refuses the config with one line each (exit 2).
    validate(config) {
      return config.min_name_length > config.max_name_length
        ? [{ key: 'min_name_length', message: \`must not be above max_name_length (\${config.max_name_length})\` }]
        : undefined;
    },
    // Its store uses only ctx.data, the async data layer: it runs on SQLite and PostgreSQL.
    engines: ['sqlite', 'postgres'],
    // Run once each, in id order, in one transaction at start (or by \`wharf migrate up\`).
    // Tables are prefixed with the plugin's name. \`sql\` when both engines read it alike;
    // \`{ sqlite, postgres }\` when they differ; \`async apply(db)\` for code.
    migrations: [{ id: '001-create-greetings', sql: 'CREATE TABLE __NAME___greetings (name TEXT PRIMARY KEY, count INTEGER NOT NULL)' }],
    commands: [
      {
        group: '__NAME__',
        command: 'count <name>',
        describe: 'Print how many greetings a name has had',
        async handler(args, ctx) {
          const { data, close } = await ctx.open();
          try {
            const count = (await data.value<number>('SELECT count FROM __NAME___greetings WHERE name = ?', [String(args.name)])) ?? 0;
            ctx.print(String(count), { name: args.name, count });
          } finally {
            await close();
          }
        },
      },
    ],
    setup({ config, data, api, log, every }) {
      const name = z.string().trim().min(config.min_name_length).max(config.max_name_length);
      const greeting = z.object({ message: z.string(), count: z.int() });
      // Placeholders are ? (in order) or @name (an object); the layer numbers them for PostgreSQL.
      const greet = async (who: string) => {
        if (who.toLowerCase() === 'nobody') throw new WharfError('not_found', 'Nobody is not here');
        const count = await data.value<number>(
          'INSERT INTO __NAME___greetings (name, count) VALUES (?, 1) ON CONFLICT (name) DO UPDATE SET count = __NAME___greetings.count + 1 RETURNING count',
          [who],
        );
        return { message: \`\${config.greeting}, \${who}!\`, count: count! };
      };

      // One group per URL prefix: a 404 or 405 under /__NAME__ answers in its envelope ({error}).
      const group = api.group({ prefixes: ['/__NAME__'], envelope: 'plain' });
      group.route({
        method: 'GET',
        path: '/__NAME__/greet',
        summary: 'Greet a name and count the greeting',
        tag: '__NAME__',
        auth: PUBLIC,
        // Validated by the core: a bad query answers 400 {error} before the handler runs.
        query: z.object({ name }),
        success: { schema: greeting },
        errors: { 404: 'Nobody to greet' },
        async handler(ctx, { query }) {
          ctx.body = await greet(query.name);
        },
      });
      group.route({
        method: 'POST',
        path: '/__NAME__/greet',
        summary: 'Greet a name sent in the body',
        tag: '__NAME__',
        auth: PUBLIC,
        body: z.object({ name }),
        success: { status: 201, schema: greeting },
        async handler(ctx, { body }) {
          ctx.body = await greet(body.name);
          ctx.status = 201;
        },
      });

      // Runs once the server has started; stopped when it closes; a failure is logged with its name.
      every('log-greeted-names', 3_600_000, async () => {
        log.info({ names: await data.value<number>('SELECT COUNT(*) FROM __NAME___greetings') }, 'names greeted so far');
      });

      const service: GreetingService = { count: async (who) => (await data.value<number>('SELECT count FROM __NAME___greetings WHERE name = ?', [who])) ?? 0 };
      return { service, routes: [group] };
    },
  }),
);
`;

const README = `# __NAME__: a Wharf plugin

Made by \`wharf plugins new __NAME__\` (wharf __VERSION__, plugin contract __CONTRACT__).

## Build

\`\`\`sh
npm install
npm run build      # tsc type-checks, esbuild bundles: dist/__NAME__.mjs
\`\`\`

## Install

Name a directory of plugins in Wharf's config and put the built module there (or a link to
this folder: its package.json \`main\` points at the build):

\`\`\`toml
[plugins]
dir = "/etc/wharf/plugins"

[plugins.__NAME__]
greeting = "Hello"
\`\`\`

\`\`\`sh
cp dist/__NAME__.mjs /etc/wharf/plugins/
wharf config check wharf.toml    # loads the plugin and validates its section
wharf plugins list               # shows __NAME__ and the file it came from
wharf migrate up                 # or let wharf serve apply its migration
\`\`\`

## The contract

\`wharf-plugin/\` is the package of the wharf that made this project: \`definePlugin\` and the
types of the plugin contract (__CONTRACT__). A wharf loads plugins built for the same major
contract version and a minor version no newer than its own; to build for another wharf, take
its \`wharf-plugin\` (\`wharf plugins new\` writes it, \`npm run build\` of Wharf puts it in
dist/wharf-plugin/) and rebuild.

Use the kit's \`z\`, never a zod of your own at run time: schemas cross into the core, which
validates your config section and your routes' input with them and documents them in
\`GET /api/openapi.json\`. The build fails if src imports zod at run time (\`import type\` is
fine).
`;
