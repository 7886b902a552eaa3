/**
 * Packages the single executable carries as a bundle of their own (the asset {@link LAZY_ASSET}),
 * evaluated the first time the program uses one of them: the HTTP client of webhook deliveries
 * (undici), the AWS SDK of the s3 driver and the CLI's file commands, and smithy's SigV4 signer
 * of the embedded endpoint. Every use of them is behind a dynamic import already; in the
 * program's bundle V8 still kept their 2 MB of source in the heap and the start read them from
 * the executable (BENCHMARKS.md, issue 16). The build replaces each of these packages in the
 * program's bundle by a module that returns it from here; running from source, this is unused.
 */
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { evaluateBundle, seaModule } from './native.ts';

/** The asset name of the packages' bundle in the single executable (build/build.ts writes it). */
export const LAZY_ASSET = 'lazy-packages.cjs';

/** The packages (exact import specifiers) that load from {@link LAZY_ASSET}. */
export const LAZY_PACKAGES = ['undici', '@aws-sdk/client-s3', '@smithy/signature-v4'] as const;

let loaded: Record<string, unknown> | undefined;

/** One package's module (its CommonJS exports), evaluating the packages' bundle on first use. */
export function lazyPackage(name: (typeof LAZY_PACKAGES)[number]): unknown {
  if (!loaded) {
    const sea = seaModule();
    // The bundle outside the executable (build --bundle): the file next to it.
    const file = path.join(path.dirname(fileURLToPath(import.meta.url)), LAZY_ASSET);
    const code = sea ? (sea.getAsset(LAZY_ASSET, 'utf8') as string) : fs.readFileSync(file, 'utf8');
    loaded = evaluateBundle(code, 'wharf-lazy-packages.cjs') as Record<string, unknown>;
  }
  if (!(name in loaded)) throw new Error(`${name} is not in ${LAZY_ASSET}`);
  return loaded[name];
}
