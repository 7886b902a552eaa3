/**
 * `wharf files upload|ls|rm|get`: files of one app, with the app's API token (`--token` or
 * WHARF_APP_TOKEN), as the spec's SDK callers do: `POST /api/tokens/validate` gives the store's
 * connection details, bytes go straight to the store, `POST /api/files` records them, and
 * `GET|DELETE /api/files` list and remove them. No sign-in is needed.
 */
import { humanBytes } from './bytes.ts';
import { count, print, table, warn } from './output.ts';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { Argv } from 'yargs';
import { type ClientArgs, instanceOf, run } from './command-kit.ts';
import { UnreachableError } from './errors.ts';
import { ClientError, errorText, readJson } from './http.ts';
import { Progress } from './progress.ts';
import { headObject, MIN_PART_BYTES, type Outcome, parseSize, planUploads, transfer } from './upload.ts';

interface FilesArgs extends ClientArgs {
  token?: string;
}

interface Validation {
  appId: string;
  bucketName: string;
  storage: { endPoint: string; port: number; useSSL: boolean; accessKey: string; secretKey: string };
}

interface FileRecord {
  id: string;
  key: string;
  name: string;
  size: number;
  type: string;
  uploadedAt: string;
}

function tokenOf(args: FilesArgs): string {
  const token = args.token ?? process.env.WHARF_APP_TOKEN;
  if (!token) throw new ClientError('give the app API token with --token (or WHARF_APP_TOKEN)');
  return token;
}

async function call<T>(instance: string, method: string, pathname: string, options: { token?: string; body?: unknown; signal?: AbortSignal } = {}): Promise<T> {
  let res: Response;
  try {
    res = await fetch(`${instance}${pathname}`, {
      method,
      headers: {
        accept: 'application/json',
        ...(options.token ? { authorization: `Bearer ${options.token}` } : {}),
        ...(options.body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      body: options.body === undefined ? undefined : JSON.stringify(options.body),
      signal: options.signal,
    });
  } catch (err) {
    throw new UnreachableError(instance, err);
  }
  const body = await readJson(res);
  if (!res.ok) throw new ClientError(errorText(body, res.status), res.status);
  return body as T;
}

/** The exit code of a command stopped by Ctrl-C (128 + SIGINT), as shells report it. */
const EXIT_INTERRUPTED = 130;

/** The most files `POST /api/files` and `DELETE /api/files` take in one request. */
const BATCH = 1000;
/** Uploaded files are recorded in batches of this many, so an interrupted run loses few records. */
const RECORD_EVERY = 100;

function chunks<T>(items: readonly T[], size: number): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size));
  return out;
}

/** The S3 client for the app's bucket, with the key validation handed out (loaded only when needed). */
async function storeFor(instance: string, token: string, signal?: AbortSignal) {
  const validation = await call<Validation>(instance, 'POST', '/api/tokens/validate', { body: { token }, signal });
  const { S3Client } = await import('@aws-sdk/client-s3');
  const { endPoint, port, useSSL, accessKey, secretKey } = validation.storage;
  const s3 = new S3Client({
    endpoint: `${useSSL ? 'https' : 'http'}://${endPoint}:${port}`,
    region: 'us-east-1',
    forcePathStyle: true,
    credentials: { accessKeyId: accessKey, secretAccessKey: secretKey },
    requestChecksumCalculation: 'WHEN_REQUIRED',
    responseChecksumValidation: 'WHEN_REQUIRED',
  });
  return { s3, bucket: validation.bucketName };
}

export function addFileCommands(cli: Argv): void {
  cli.command('files', "An app's files, with its API token", (y) =>
    y
      .option('token', { type: 'string', describe: 'The app API token (svc_live_...; or WHARF_APP_TOKEN)' })
      .command(
        'upload <paths..>',
        'Upload files and folders (recursively) to the app and record them; large files go up in parts and a re-run continues them',
        (c) =>
          c
            .positional('paths', { type: 'string', array: true, demandOption: true, describe: 'Files and folders' })
            .option('prefix', { type: 'string', default: '', describe: 'Key prefix inside the bucket, for example photos/' })
            .option('concurrency', { type: 'number', default: 4, describe: 'Transfers (files or parts) at once, 1 to 32' })
            .option('multipart-threshold', { type: 'string', default: '16MiB', describe: 'Files from this size up go through multipart upload (resumable)' })
            .option('part-size', { type: 'string', default: '8MiB', describe: 'Multipart part size (at least 5MiB)' }),
        run<FilesArgs & { paths: string[]; prefix: string; concurrency: number; multipartThreshold: string; partSize: string }>(async (args) => {
          const instance = instanceOf(args);
          const token = tokenOf(args);
          if (!Number.isInteger(args.concurrency) || args.concurrency < 1 || args.concurrency > 32)
            throw new ClientError(`--concurrency must be a whole number from 1 to 32: ${args.concurrency}`);
          const threshold = parseSize(args.multipartThreshold, '--multipart-threshold');
          const partSize = parseSize(args.partSize, '--part-size');
          if (partSize < MIN_PART_BYTES) throw new ClientError(`--part-size must be at least 5MiB (the store's smallest part): ${args.partSize}`);
          const plan = planUploads(args.paths, args.prefix);
          if (plan.skipped.length) {
            const what = count(plan.skipped.length, 'entry that is not a regular file', 'entries that are not regular files');
            warn(`wharf: skipping ${what} (symbolic links and the like; first: ${plan.skipped[0]})`);
          }
          const order = new Map(plan.files.map((f, i) => [f, i]));
          const totalBytes = plan.files.reduce((sum, f) => sum + f.size, 0);
          const progress = new Progress({ totalBytes, totalFiles: plan.files.length, stream: process.stderr, lines: args.json ? null : process.stdout });
          const started = Date.now();

          // Ctrl-C aborts the requests in flight and starts no more; what finished is still
          // recorded, then the command says what is left and exits 130. A second Ctrl-C exits at once.
          const interrupt = new AbortController();
          const onSigint = () => {
            if (interrupt.signal.aborted) {
              warn('wharf: interrupted again: stopped at once; run the same command again to record what is in the store');
              process.exit(EXIT_INTERRUPTED);
            }
            interrupt.abort();
          };
          process.on('SIGINT', onSigint);
          const recorded: { at: number; outcome: Outcome; record: FileRecord }[] = [];
          const failures: string[] = [];
          let pending: Outcome[] = [];
          // Records are written one batch at a time, in the order files finish.
          let recording: Promise<void> = Promise.resolve();
          const record = (batch: Outcome[]) => {
            recording = recording.then(async () => {
              for (const part of chunks(batch, BATCH)) {
                const files = part.map(({ file: { key, name, size, type } }) => ({ key, name, size, type }));
                try {
                  const out = await call<{ files: FileRecord[] }>(instance, 'POST', '/api/files', { body: { token, files } });
                  for (const [i, r] of out.files.entries()) recorded.push({ at: order.get(part[i]!.file) ?? 0, outcome: part[i]!, record: r });
                } catch (err) {
                  for (const o of part) failures.push(`${o.file.path}: in the store as ${o.file.key}, but recording it failed: ${(err as Error).message}`);
                }
              }
            });
            return recording;
          };
          try {
            const { s3, bucket } = await storeFor(instance, token, interrupt.signal);
            const options = {
              s3,
              bucket,
              threshold,
              partSize,
              concurrency: args.concurrency,
              onBytes: (n: number) => progress.add(n),
              signal: interrupt.signal,
            };
            try {
              await transfer(plan.files, options, async (outcome) => {
                const f = outcome.file;
                if (outcome.result === 'failed') {
                  failures.push(`${f.path}: ${outcome.detail}`);
                  progress.fileDone(null);
                  return;
                }
                const detail = outcome.result === 'uploaded' ? '' : `: ${outcome.detail}`;
                progress.fileDone(`${outcome.result} ${f.name} (${humanBytes(f.size)}) as ${f.key}${detail}`);
                pending.push(outcome);
                if (pending.length >= RECORD_EVERY) {
                  const batch = pending;
                  pending = [];
                  await record(batch);
                }
              });
              await record(pending);
            } finally {
              s3.destroy();
            }
          } catch (err) {
            if (!interrupt.signal.aborted) throw err;
          } finally {
            progress.finish();
            process.off('SIGINT', onSigint);
          }

          // One summary, whatever happened: on stdout (inside the JSON under --json).
          const done = recorded.sort((a, b) => a.at - b.at);
          const sent = done.filter((r) => r.outcome.result !== 'unchanged');
          const interrupted = interrupt.signal.aborted;
          const left = plan.files.length - done.length - failures.length;
          const summary = {
            uploaded: sent.length,
            bytes: sent.reduce((n, r) => n + r.outcome.file.size, 0),
            skipped: done.length - sent.length + plan.skipped.length,
            failed: failures.length,
            seconds: Math.round((Date.now() - started) / 100) / 10,
            ...(interrupted ? { interrupted: true, left } : {}),
          };
          if (args.json) process.stdout.write(`${JSON.stringify({ files: done.map((r) => r.record), summary })}\n`);
          else if (!interrupted) {
            const { uploaded, bytes, seconds, skipped, failed } = summary;
            process.stdout.write(
              `uploaded ${count(uploaded, 'file')} (${humanBytes(bytes)}) in ${seconds.toFixed(1)} s, ${skipped} skipped, ${failed} failed\n`,
            );
          }
          for (const line of failures.slice(0, 20)) warn(`wharf: ${line}`);
          if (interrupted) {
            const failed = failures.length ? `, ${failures.length} failed` : '';
            warn(`wharf: interrupted: ${done.length} of ${count(plan.files.length, 'file')} uploaded${failed}, ${left} left`);
            process.exitCode = EXIT_INTERRUPTED;
            return;
          }
          if (failures.length) {
            throw new ClientError(
              `${failures.length} of ${count(plan.files.length, 'file')} failed; run the same command again to continue (large files resume where they stopped)`,
            );
          }
        }),
      )
      .command(
        'ls',
        "List the app's files, newest first",
        (c) =>
          c
            .option('search', { type: 'string', describe: 'Substring of the file name (case-sensitive), not the key: the NAME column' })
            .option('page', { type: 'number', default: 1, describe: 'Page to show (from 1)' })
            .option('page-size', { type: 'number', default: 20, describe: 'Files per page (1 to 100)' }),
        run<FilesArgs & { search?: string; page: number; pageSize: number }>(async (args) => {
          if (args.search === '') throw new ClientError('--search needs a term: a substring of the file name');
          const query = new URLSearchParams({ page: String(args.page), pageSize: String(args.pageSize) });
          if (args.search) query.set('search', args.search);
          const result = await call<{ files: FileRecord[]; pagination: { page: number; totalPages: number; total: number } }>(
            instanceOf(args),
            'GET',
            `/api/files?${query}`,
            { token: tokenOf(args) },
          );
          const rows = result.files.map((f) => [f.name, f.key, humanBytes(f.size), f.type, f.uploadedAt]);
          const { page, totalPages, total } = result.pagination;
          print(
            args,
            rows.length
              ? `${table(['NAME', 'KEY', 'SIZE', 'TYPE', 'UPLOADED'], rows)}\npage ${page} of ${totalPages} (${count(total, 'file')})`
              : total > 0
                ? `Page ${page} is past the end: ${count(total, 'file')}${args.search === undefined ? '' : ` whose name contains "${args.search}"`} in ${count(totalPages, 'page')} of ${args.pageSize}.`
                : args.search
                  ? `No file name contains "${args.search}" (--search matches names, not keys).`
                  : 'No files.',
            result,
          );
        }),
      )
      .command(
        'rm <keys..>',
        'Delete files (their objects, then their records)',
        (c) => c.positional('keys', { type: 'string', array: true, demandOption: true }),
        run<FilesArgs & { keys: string[] }>(async (args) => {
          const instance = instanceOf(args);
          const token = tokenOf(args);
          const keys = [...new Set(args.keys)];
          // The API deletes what exists and says nothing of the rest, so ask the store first
          // which keys hold an object; every key is still sent, so a stray record goes too.
          const { s3, bucket } = await storeFor(instance, token);
          const missing: string[] = [];
          try {
            const queue = [...keys];
            await Promise.all(
              Array.from({ length: Math.min(8, keys.length) }, async () => {
                for (let key = queue.shift(); key !== undefined; key = queue.shift()) {
                  if (!(await headObject(s3, bucket, key))) missing.push(key);
                }
              }),
            );
          } catch (err) {
            throw new ClientError(`cannot check the keys in the store: ${(err as Error).message}`);
          } finally {
            s3.destroy();
          }
          for (const batch of chunks(keys, BATCH)) await call(instance, 'DELETE', '/api/files', { token, body: { keys: batch } });
          const gone = new Set(missing);
          const deleted = keys.filter((k) => !gone.has(k));
          const notFound = keys.filter((k) => gone.has(k));
          print(args, `deleted ${count(deleted.length, 'file')}`, { deleted, notFound });
          if (notFound.length) {
            for (const key of notFound) warn(`wharf: no file with key ${key}`);
            process.exitCode = 1;
          }
        }),
      )
      .command(
        'get <key>',
        "Download a file's bytes from the store (never over an existing file without --force)",
        (c) =>
          c
            .positional('key', { type: 'string', demandOption: true })
            .option('out', { type: 'string', describe: 'Where to write it: a file, or a folder to put it in (default: its name in the current directory)' })
            .option('force', { type: 'boolean', default: false, describe: 'Replace the file at --out if there is one' }),
        run<FilesArgs & { key: string; out?: string; force: boolean }>(async (args) => {
          let out = args.out ?? path.basename(args.key);
          if (fs.statSync(out, { throwIfNoEntry: false })?.isDirectory()) out = path.join(out, path.basename(args.key));
          const exists = () => new ClientError(`${out} exists; add --force to replace it, or choose another --out`);
          if (!args.force && fs.existsSync(out)) throw exists();
          const { s3, bucket } = await storeFor(instanceOf(args), tokenOf(args));
          const { GetObjectCommand } = await import('@aws-sdk/client-s3');
          // The bytes land in a temporary file beside the target, which takes its place only
          // once complete: an interrupted download never leaves half a file under the name.
          const tmp = path.join(path.dirname(out), `.${path.basename(out)}.${randomBytes(4).toString('hex')}.wharf-part`);
          try {
            const got = await s3.send(new GetObjectCommand({ Bucket: bucket, Key: args.key }));
            await pipeline(got.Body as Readable, fs.createWriteStream(tmp, { flags: 'wx', mode: 0o644 }));
            const size = fs.statSync(tmp).size;
            if (args.force) fs.renameSync(tmp, out);
            else {
              // link() fails if the name appeared meanwhile: no race overwrites a file.
              try {
                fs.linkSync(tmp, out);
              } catch (err) {
                if ((err as NodeJS.ErrnoException).code === 'EEXIST') throw exists();
                throw err;
              }
              fs.rmSync(tmp);
            }
            print(args, `wrote ${humanBytes(size)} to ${out}`, { key: args.key, out, size });
          } catch (err) {
            fs.rmSync(tmp, { force: true });
            if (err instanceof ClientError) throw err;
            const name = (err as { name?: string }).name;
            const code = (err as NodeJS.ErrnoException).code;
            if (name === 'NoSuchKey') throw new ClientError(`no file with key ${args.key}`);
            if (code === 'ENOENT' || code === 'EACCES' || code === 'ENOTDIR') throw new ClientError(`cannot write ${out}: ${(err as Error).message}`);
            throw new ClientError(`download failed: ${(err as Error).message}`);
          } finally {
            s3.destroy();
          }
        }),
      )
      .demandCommand(1, 'name a files command'),
  );
}
