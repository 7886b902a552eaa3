/**
 * `npm run build`: bundle with esbuild, then make `dist/wharf`, a Node single-executable
 * application on the project's pinned Node (24.21.0), carrying better-sqlite3's addon and the
 * dashboard's built files (build/dashboard.ts) as assets, the program's bundle as an asset run by
 * build/sea-main.cjs with a V8 code cache made from a start of the binary itself (so the binary is
 * made twice: without the cache, then with it); and `dist/wharf-plugin/`, the package plugins built outside this
 * repository compile against (build/sdk.ts), which the binary carries too for `wharf plugins new`.
 * The WhatsApp runtime (Baileys) is a second bundle carried as an asset and evaluated only when a
 * whatsapp session starts; the third-party notices of every bundle (the program, Baileys, the
 * dashboard's browser code) are generated and carried too.
 *
 *   node build/build.ts            bundle + binary
 *   node build/build.ts --bundle   bundle only (dist/wharf.cjs)
 */
import { execFileSync, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { type BuildOptions, build, type Metafile, type Plugin } from 'esbuild';
import { SDK_ASSET } from '../bin/plugin-template.ts';
import { SQLITE_ASSET, SQLITE_SHA_ASSET } from '../core/native.ts';
import { CHECKPOINT_ASSET } from '../core/db-checkpoint.ts';
import { LAZY_ASSET, LAZY_PACKAGES } from '../core/lazy-packages.ts';
import { WHATSAPP_ASSET } from '../plugins/sessions/networks/whatsapp/load.ts';
import { bundledPackages, NOTICES_ASSET, noticesText } from './notices.ts';
import { DASHBOARD_ASSET } from '../plugins/dashboard/assets.ts';
import { dashboardBundle } from './dashboard.ts';
import { sdkFiles, writeFiles } from './sdk.ts';
import { BINARY_V8_FLAGS } from './v8-flags.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const dist = path.join(root, 'dist');
const bundleFile = path.join(dist, 'wharf.cjs');
const whatsappFile = path.join(dist, WHATSAPP_ASSET);
const lazyFile = path.join(dist, LAZY_ASSET);
/** The WAL checkpoint worker (core/db-checkpoint.ts), run by the executable as a worker thread's code. */
const checkpointFile = path.join(dist, CHECKPOINT_ASSET);
const noticesFile = path.join(dist, NOTICES_ASSET);
/** The dashboard's script and stylesheet, as one JSON asset (file name -> text). */
const dashboardFile = path.join(dist, DASHBOARD_ASSET);
const binary = path.join(dist, 'wharf');
/** The bundle as the binary carries it (build/sea-main.cjs runs it), and the V8 code cache made for it. */
const seaBundleFile = path.join(dist, 'wharf-sea.cjs');
const codeCacheFile = path.join(dist, 'wharf.cjs.cache');
const SEA_FUSE = 'NODE_SEA_FUSE_fce680ab2cc467b6e072b8b5df1996b2';

function step(label: string, started = performance.now()) {
  return () => process.stdout.write(`${label} (${Math.round(performance.now() - started)} ms)\n`);
}

const COMMON: BuildOptions = {
  bundle: true,
  platform: 'node',
  format: 'cjs',
  target: 'node24',
  minifySyntax: true,
  minifyWhitespace: true,
  legalComments: 'none',
  logLevel: 'warning',
  metafile: true,
  // yargs reads import.meta.url, which esbuild's cjs output would silently turn into {}.
  define: { 'import.meta.url': '__import_meta_url', 'import.meta.main': 'false' },
  banner: { js: "const __import_meta_url = require('node:url').pathToFileURL(__filename).href;" },
};

/**
 * In the program's bundle, each of LAZY_PACKAGES is a module returning the package from the
 * packages' own bundle (core/lazy-packages.ts), evaluated when first required.
 */
const lazyPackages: Plugin = {
  name: 'lazy-packages',
  setup(b) {
    const names = new Set<string>(LAZY_PACKAGES);
    b.onResolve({ filter: /^[@a-z]/ }, (args) => (names.has(args.path) ? { path: args.path, namespace: 'lazy-package' } : undefined));
    b.onLoad({ filter: /.*/, namespace: 'lazy-package' }, (args) => ({
      contents: `module.exports = require(${JSON.stringify(path.join(root, 'core/lazy-packages.ts'))}).lazyPackage(${JSON.stringify(args.path)});`,
      resolveDir: root,
      loader: 'js',
    }));
  },
};

/**
 * The five bundles: the program; the WhatsApp runtime (Baileys), which the program loads only
 * when it needs it; the packages the program loads on first use (core/lazy-packages.ts); the
 * WAL checkpoint worker (better-sqlite3's JavaScript with it; the addon is the program's); the
 * dashboard's browser code (its files, carried as an asset).
 */
export async function bundles(write = true): Promise<{
  main: Metafile;
  whatsapp: Metafile;
  lazy: Metafile;
  checkpoint: Metafile;
  dashboard: Awaited<ReturnType<typeof dashboardBundle>>;
}> {
  const done = write ? step('bundle') : () => {};
  if (write) fs.mkdirSync(dist, { recursive: true });
  const [main, whatsapp, lazy, checkpoint, dashboard] = await Promise.all([
    // The source map (dist/wharf.cjs.map, not carried in the binary) names the sources in profiles
    // of the binary (bench/profile-top.ts).
    build({ ...COMMON, write, entryPoints: [path.join(root, 'build/entry.ts')], outfile: bundleFile, plugins: [lazyPackages], sourcemap: 'external' }),
    build({
      ...COMMON,
      write,
      entryPoints: [path.join(root, 'plugins/sessions/networks/whatsapp/runtime.ts')],
      outfile: whatsappFile,
      // Baileys' optional peers (image and audio processing, link previews): not installed, so
      // not bundled; Baileys catches their absence (no thumbnails, no link previews).
      external: ['sharp', 'jimp', 'audio-decode', 'link-preview-js'],
    }),
    build({
      ...COMMON,
      write,
      stdin: {
        contents: `module.exports = {${LAZY_PACKAGES.map((name) => `${JSON.stringify(name)}: require(${JSON.stringify(name)})`).join(', ')}};`,
        resolveDir: root,
        sourcefile: 'lazy-packages.js',
        loader: 'js',
      },
      outfile: lazyFile,
    }),
    build({ ...COMMON, write, entryPoints: [path.join(root, 'core/db-checkpoint-worker.ts')], outfile: checkpointFile }),
    dashboardBundle(),
  ]);
  done();
  return { main: main.metafile!, whatsapp: whatsapp.metafile!, lazy: lazy.metafile!, checkpoint: checkpoint.metafile!, dashboard };
}

/** The third-party notices of what the bundles contain. */
export async function notices(): Promise<string> {
  const { main, whatsapp, lazy, checkpoint, dashboard } = await bundles(false);
  return noticesText(bundledPackages([main, whatsapp, lazy, checkpoint, dashboard.metafile], root));
}

/** Writes the program's bundle, the WhatsApp runtime, the notices and the dashboard asset to dist/. */
export async function bundle(): Promise<void> {
  const { main, whatsapp, lazy, checkpoint, dashboard } = await bundles();
  if (Object.keys(main.inputs).some((input) => input.includes('node_modules/baileys/'))) {
    throw new Error('the main bundle contains Baileys: it must load only through plugins/sessions/networks/whatsapp/load.ts');
  }
  const eager = LAZY_PACKAGES.find((name) => Object.keys(main.inputs).some((input) => input.includes(`node_modules/${name}/`)));
  if (eager) throw new Error(`the main bundle contains ${eager}: it must load only through core/lazy-packages.ts`);
  fs.writeFileSync(noticesFile, noticesText(bundledPackages([main, whatsapp, lazy, checkpoint, dashboard.metafile], root)));
  fs.writeFileSync(dashboardFile, JSON.stringify(dashboard.files));
}

function nodeBinary(): string {
  const candidate = path.join(root, 'node_modules/node/bin/node');
  const execPath = fs.existsSync(candidate) ? candidate : process.execPath;
  const version = execFileSync(execPath, ['--version']).toString().trim();
  if (!version.startsWith('v24.')) throw new Error(`the binary must embed Node 24, found ${version} at ${execPath}`);
  return execPath;
}

/** dist/wharf-plugin/ and the same files as one JSON asset for the binary. */
async function pluginPackage(): Promise<string> {
  const done = step('wharf-plugin package');
  const files = await sdkFiles();
  const dir = path.join(dist, 'wharf-plugin');
  fs.rmSync(dir, { recursive: true, force: true });
  writeFiles(dir, files);
  const asset = path.join(dist, SDK_ASSET);
  fs.writeFileSync(asset, JSON.stringify(files));
  done();
  return asset;
}

export async function buildBinary(): Promise<string> {
  await bundle();
  const sdkAsset = await pluginPackage();
  const node = nodeBinary();
  const addon = path.join(root, 'node_modules/better-sqlite3/prebuilds', `${process.platform}-${process.arch}.node`);
  if (!fs.existsSync(addon)) throw new Error(`no prebuilt better-sqlite3 addon at ${addon}`);
  const addonSha = path.join(dist, SQLITE_SHA_ASSET);
  fs.writeFileSync(addonSha, createHash('sha256').update(fs.readFileSync(addon)).digest('hex'));
  const program = fs.readFileSync(bundleFile, 'utf8');
  // build/sea-main.cjs reads it as latin1: esbuild writes ASCII (its default charset).
  if (/[^\p{ASCII}]/u.test(program)) throw new Error(`${bundleFile} is not ASCII: build/sea-main.cjs would misread it`);
  fs.writeFileSync(seaBundleFile, `(function (exports, require, module, __filename, __dirname) {${program}\n})`);
  const assets = {
    [SQLITE_ASSET]: addon,
    [SQLITE_SHA_ASSET]: addonSha,
    [SDK_ASSET]: sdkAsset,
    [WHATSAPP_ASSET]: whatsappFile,
    [LAZY_ASSET]: lazyFile,
    [CHECKPOINT_ASSET]: checkpointFile,
    [NOTICES_ASSET]: noticesFile,
    [DASHBOARD_ASSET]: dashboardFile,
    // The names build/sea-main.cjs reads.
    'wharf.cjs': seaBundleFile,
  };
  // First the binary without a code cache; a start of it to its first answer makes the cache
  // (build/sea-main.cjs); then the binary with it.
  const training = `${binary}.training`;
  seaBinary(node, training, assets);
  const done = step('code cache');
  try {
    fs.writeFileSync(codeCacheFile, await startCodeCache(training));
  } finally {
    fs.rmSync(training, { force: true });
  }
  done();
  seaBinary(node, binary, { ...assets, 'wharf.cjs.cache': codeCacheFile });
  const mib = fs.statSync(binary).size / 2 ** 20;
  process.stdout.write(`${path.relative(root, binary)}: ${mib.toFixed(1)} MiB\n`);
  return binary;
}

/** A single executable of `node` at `output`, build/sea-main.cjs its main script, carrying `assets`. */
function seaBinary(node: string, output: string, assets: Record<string, string>): void {
  const blob = path.join(dist, 'sea-prep.blob');
  const seaConfig = path.join(dist, 'sea-config.json');
  fs.writeFileSync(
    seaConfig,
    JSON.stringify({
      main: path.join(root, 'build/sea-main.cjs'),
      output: blob,
      disableExperimentalSEAWarning: true,
      useCodeCache: true,
      // See v8-flags.ts (why each flag). NODE_OPTIONS still extends them.
      execArgv: [...BINARY_V8_FLAGS],
      assets,
    }),
  );
  let done = step('sea blob');
  // Node's code cache of the blob (useCodeCache) is made here: under the binary's V8 flags, which
  // V8 checks it against (a cache made under other flags is rejected, with a warning, at every start).
  execFileSync(node, [...BINARY_V8_FLAGS, '--experimental-sea-config', seaConfig], { stdio: ['ignore', 'ignore', 'inherit'] });
  done();

  done = step('inject');
  const tmp = `${output}.tmp`;
  fs.copyFileSync(node, tmp);
  fs.chmodSync(tmp, 0o755);
  try {
    execFileSync('strip', ['--strip-all', tmp], { stdio: 'ignore' });
  } catch {
    process.stdout.write('strip not available; the binary keeps its symbols\n');
  }
  const postject = path.join(root, 'node_modules/postject/dist/cli.js');
  // postject prints harmless "Can't find string offset" lines; keep its output out of the way.
  execFileSync(node, [postject, tmp, 'NODE_SEA_BLOB', blob, '--sentinel-fuse', SEA_FUSE], { stdio: 'ignore' });
  fs.renameSync(tmp, output);
  done();
}

/**
 * The code cache of a start: `wharf serve` of `training` on embedded defaults and a fresh data
 * dir (what the benchmarks start), until GET /healthz answers 200; then SIGUSR2 makes it write
 * the cache (build/sea-main.cjs).
 */
async function startCodeCache(training: string): Promise<Buffer> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'wharf-code-cache-'));
  const out = path.join(dir, 'cache');
  const port = await new Promise<number>((resolve) => {
    const probe = net.createServer().listen(0, '127.0.0.1', () => {
      const { port } = probe.address() as net.AddressInfo;
      probe.close(() => resolve(port));
    });
  });
  // Only the variables a start needs: no WHARF_* or NODE_OPTIONS of the shell that builds.
  const env = { PATH: process.env.PATH ?? '', HOME: dir, WHARF_PLUGINS__STORAGE__FS__LISTEN: '127.0.0.1:0', WHARF_SEA_CODE_CACHE: out };
  const child = spawn(training, ['serve', '--listen', `127.0.0.1:${port}`, '--data-dir', path.join(dir, 'data')], {
    cwd: dir,
    env,
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr.on('data', (d: Buffer) => (stderr += d));
  const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
  try {
    for (let started = Date.now(); ; ) {
      if (child.exitCode !== null) throw new Error(`the training start exited: ${stderr}`);
      const status = await fetch(`http://127.0.0.1:${port}/healthz`).then(
        (res) => res.arrayBuffer().then(() => res.status),
        () => 0,
      );
      if (status === 200) break;
      if (Date.now() - started > 60_000) throw new Error(`the training start did not answer in 60 s: ${stderr}`);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    child.kill('SIGUSR2');
    if ((await exited) !== 0 || !fs.existsSync(out)) throw new Error(`the training start wrote no code cache: ${stderr}`);
    return fs.readFileSync(out);
  } finally {
    child.kill('SIGKILL');
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

if (import.meta.main) {
  const only = process.argv.includes('--bundle');
  (only ? bundle() : buildBinary()).catch((err: unknown) => {
    process.stderr.write(`build failed: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(1);
  });
}
