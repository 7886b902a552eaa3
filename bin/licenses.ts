/**
 * `wharf licenses`: the third-party notices of this build (what the binary bundles, each
 * package with its licence text). The single executable carries them as an asset made at build
 * time; from source they are generated from the bundles the build would make (esbuild, a
 * development dependency), or read from dist/ when a build left them there.
 */
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { seaModule } from '../core/native.ts';

/** The asset name the build gives the notices (build/notices.ts). */
const NOTICES_ASSET = 'THIRD-PARTY-NOTICES.txt';

export async function thirdPartyNotices(): Promise<string> {
  const sea = seaModule();
  if (sea) return sea.getAsset(NOTICES_ASSET, 'utf8') as string;
  const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
  try {
    // A computed specifier: the build script (and esbuild) never enter the program's bundle.
    const builder = new URL('../build/build.ts', import.meta.url).href;
    const { notices } = (await import(builder)) as { notices(): Promise<string> };
    return await notices();
  } catch (err) {
    const built = path.join(root, 'dist', NOTICES_ASSET);
    if (fs.existsSync(built)) return fs.readFileSync(built, 'utf8');
    throw new Error(`cannot generate the notices without the build tools (${(err as Error).message}); run npm run build`);
  }
}
