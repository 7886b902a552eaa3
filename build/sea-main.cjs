'use strict';
/**
 * The single executable's main script (build/build.ts). It runs the program's bundle, carried as
 * the asset `wharf.cjs` (wrapped as a CommonJS module function), compiled with the V8 code cache
 * carried as `wharf.cjs.cache`, which the build made from a run of the same binary once it had
 * answered its first request. Node's own code cache of a single executable (`useCodeCache`) is
 * made before the program runs, so it holds only the functions V8 compiles eagerly; every other
 * function the start calls was compiled during the start. This cache holds those too: about a
 * quarter less CPU from spawn to the first 200 (BENCHMARKS.md, issue 16 part 6).
 *
 * V8 refuses a cache made by another V8 or under other flags (NODE_OPTIONS=--cpu-prof, say): the
 * bundle is then compiled as it would be without one, which only takes longer.
 * WHARF_DEBUG_CODE_CACHE=1 prints whether the cache was used.
 *
 * Without the cache asset (the build's first binary), WHARF_SEA_CODE_CACHE names the file the
 * cache is written to on SIGUSR2, after which the process exits.
 */
const path = require('node:path');
const sea = require('node:sea');
const vm = require('node:vm');

// import() through Node's default loader (below) is experimental on Node 24, and Node says so at
// the first import() (a plugin's file). It is what a main script's import() does anyway: that one
// warning is left out, every other is emitted.
const DEFAULT_LOADER_WARNING = 'vm.USE_MAIN_CONTEXT_DEFAULT_LOADER is an experimental feature';
const emitWarning = process.emitWarning;
process.emitWarning = function (warning, ...rest) {
  if (typeof warning === 'string' && warning.startsWith(DEFAULT_LOADER_WARNING)) return;
  return emitWarning.call(this, warning, ...rest);
};

const BUNDLE = 'wharf.cjs';
const CACHE = 'wharf.cjs.cache';
const cached = sea.getAssetKeys().includes(CACHE);
// The bundle is ASCII (esbuild escapes the rest; build/build.ts checks): read as latin1, which
// copies bytes, where UTF-8 decoding took tens of milliseconds of the start.
const source = Buffer.from(sea.getRawAsset(BUNDLE)).toString('latin1');
const script = new vm.Script(source, {
  // Beside the executable, as dist/wharf.cjs is: profiles of dist/wharf then map through dist/wharf.cjs.map.
  filename: path.join(path.dirname(process.execPath), BUNDLE),
  cachedData: cached ? new Uint8Array(sea.getRawAsset(CACHE)) : undefined,
  // import() of a plugin's file (core/external-plugins.ts) through Node's own loader, as in a main script.
  importModuleDynamically: vm.constants.USE_MAIN_CONTEXT_DEFAULT_LOADER,
});
if (process.env.WHARF_DEBUG_CODE_CACHE === '1') {
  process.stderr.write(`code cache: ${cached ? (script.cachedDataRejected ? 'rejected' : 'used') : 'none'}\n`);
}
const out = process.env.WHARF_SEA_CODE_CACHE;
if (!cached && out) {
  process.once('SIGUSR2', () => {
    require('node:fs').writeFileSync(out, script.createCachedData());
    process.exit(0);
  });
}
script.runInThisContext()(module.exports, require, module, __filename, __dirname);
