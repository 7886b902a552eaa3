/**
 * The `wharf-plugin` package, what a plugin built outside this repository compiles against:
 * `index.js` (core/sdk.ts bundled: `definePlugin` and the contract version), the declarations
 * of the contract's types under `types/` (emitted by tsc from core/sdk.ts and what it imports)
 * and a package.json. `npm run build` writes it to dist/wharf-plugin/ and carries it in the
 * binary, where `wharf plugins new` finds it; from source, `wharf plugins new` makes it here.
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';
import pkg from '../package.json' with { type: 'json' };
import { PLUGIN_CONTRACT } from '../core/plugin.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
/** The package's files, relative path -> content. */
export async function sdkFiles(): Promise<Record<string, string>> {
  const files: Record<string, string> = {};
  const out = fs.mkdtempSync(path.join(os.tmpdir(), 'wharf-sdk-'));
  try {
    const tsc = path.join(root, 'node_modules/typescript/bin/tsc');
    // stripInternal drops what the core keeps to itself (a route group's router, the registry's mount).
    execFileSync(
      process.execPath,
      [
        tsc,
        '--ignoreConfig',
        path.join(root, 'core/sdk.ts'),
        ...['--declaration', '--emitDeclarationOnly', '--stripInternal', '--outDir', out],
        ...['--module', 'nodenext', '--moduleResolution', 'nodenext', '--target', 'es2024', '--types', 'node'],
        ...['--allowImportingTsExtensions', '--verbatimModuleSyntax', '--resolveJsonModule', '--skipLibCheck', '--strict'],
      ],
      { cwd: root, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    for (const name of fs.readdirSync(out).sort()) {
      if (!name.endsWith('.d.ts')) continue;
      // A package's declarations import each other as .js (what resolves under every moduleResolution).
      const text = fs.readFileSync(path.join(out, name), 'utf8').replace(/(from\s+|import\()(['"])(\.\.?\/[^'"]+)\.ts\2/g, '$1$2$3.js$2');
      files[`types/${name}`] = text;
    }
  } finally {
    fs.rmSync(out, { recursive: true, force: true });
  }
  const bundled = await build({
    entryPoints: [path.join(root, 'core/sdk.ts')],
    bundle: true,
    write: false,
    platform: 'neutral',
    // Paths in the output's comments relative to the repository, wherever the build runs from.
    absWorkingDir: root,
    format: 'esm',
    target: 'es2022',
    legalComments: 'none',
    logLevel: 'warning',
  });
  files['index.js'] = bundled.outputFiles[0]!.text;
  files['package.json'] = `${JSON.stringify(
    {
      name: 'wharf-plugin',
      version: pkg.version,
      description: `Types and definePlugin for Wharf plugins built outside its repository (plugin contract ${PLUGIN_CONTRACT}).`,
      type: 'module',
      exports: { '.': { types: './types/sdk.d.ts', default: './index.js' } },
      types: './types/sdk.d.ts',
      wharf: { contract: PLUGIN_CONTRACT },
    },
    null,
    2,
  )}\n`;
  return files;
}

/** Writes the package's files into `dir`. */
export function writeFiles(dir: string, files: Record<string, string>): void {
  for (const [name, text] of Object.entries(files)) {
    const file = path.join(dir, name);
    fs.mkdirSync(path.dirname(file), { recursive: true });
    fs.writeFileSync(file, text);
  }
}
