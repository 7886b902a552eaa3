/**
 * Builds a plugin project made by `wharf plugins new` as its author would (`npm run build`:
 * tsc, then esbuild), without the network: its devDependencies are linked from this checkout's
 * node_modules (the same versions the template pins), and wharf-plugin from the project's own
 * copy, as `npm install` of its `file:` dependency would.
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { root } from './cli.ts';

export function buildPluginProject(dir: string): { status: number | null; output: string } {
  const manifest = JSON.parse(fs.readFileSync(path.join(dir, 'package.json'), 'utf8')) as { devDependencies: Record<string, string> };
  const modules = path.join(dir, 'node_modules');
  for (const [name, version] of Object.entries(manifest.devDependencies)) {
    const link = path.join(modules, name);
    fs.mkdirSync(path.dirname(link), { recursive: true });
    if (version.startsWith('file:')) {
      fs.symlinkSync(path.resolve(dir, version.slice('file:'.length)), link);
      continue;
    }
    const installed = JSON.parse(fs.readFileSync(path.join(root, 'node_modules', name, 'package.json'), 'utf8')) as { version: string };
    // The template pins what this checkout has: a drift here would build against other types.
    if (installed.version !== version) throw new Error(`${name}: the template pins ${version}, this checkout has ${installed.version}`);
    fs.symlinkSync(path.join(root, 'node_modules', name), link);
  }
  fs.mkdirSync(path.join(modules, '.bin'), { recursive: true });
  fs.symlinkSync('../typescript/bin/tsc', path.join(modules, '.bin/tsc'));
  const r = spawnSync('npm', ['run', 'build'], {
    cwd: dir,
    encoding: 'utf8',
    timeout: 120_000,
    // The project's Node first, as `npm install` of the template's @types/node 24 assumes.
    env: { ...process.env, PATH: `${path.dirname(process.execPath)}:${process.env.PATH}` },
  });
  return { status: r.status, output: `${r.stdout}${r.stderr}` };
}
