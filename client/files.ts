/**
 * `wharf files upload|ls|rm|get`: files of one app, with the app's API token (`--token` or
 * WHARF_APP_TOKEN), as the spec's SDK callers do: `POST /api/tokens/validate` gives the store's
 * connection details, bytes go straight to the store, `POST /api/files` records them, and
 * `GET|DELETE /api/files` list and remove them. No sign-in is needed.
 */
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import type { Argv } from 'yargs';
import { type ClientArgs, instanceOf, run } from './commands.ts';
import { ClientError, errorText, readJson } from './http.ts';
import { table } from './messaging.ts';

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

const TYPES: Record<string, string> = {
  '.txt': 'text/plain',
  '.html': 'text/html',
  '.json': 'application/json',
  '.pdf': 'application/pdf',
  '.png': 'image/png',
  '.jpg': 'image/jpeg',
  '.jpeg': 'image/jpeg',
  '.gif': 'image/gif',
  '.webp': 'image/webp',
  '.svg': 'image/svg+xml',
  '.mp4': 'video/mp4',
  '.mp3': 'audio/mpeg',
  '.zip': 'application/zip',
  '.csv': 'text/csv',
};

function tokenOf(args: FilesArgs): string {
  const token = args.token ?? process.env.WHARF_APP_TOKEN;
  if (!token) throw new ClientError('give the app API token with --token (or WHARF_APP_TOKEN)');
  return token;
}

async function call<T>(instance: string, method: string, pathname: string, options: { token?: string; body?: unknown } = {}): Promise<T> {
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
    });
  } catch (err) {
    throw new ClientError(`cannot reach ${instance}: ${(err as Error).message}`);
  }
  const body = await readJson(res);
  if (!res.ok) throw new ClientError(errorText(body, res.status), res.status);
  return body as T;
}

/** The S3 client for the app's bucket, with the key validation handed out (loaded only when needed). */
async function storeFor(instance: string, token: string) {
  const validation = await call<Validation>(instance, 'POST', '/api/tokens/validate', { body: { token } });
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

function print(args: ClientArgs, text: string, json: unknown): void {
  process.stdout.write(args.json ? `${JSON.stringify(json)}\n` : `${text}\n`);
}

export function addFileCommands(cli: Argv): void {
  cli.command('files', "An app's files, with its API token", (y) =>
    y
      .option('token', { type: 'string', describe: 'The app API token (svc_live_...; or WHARF_APP_TOKEN)' })
      .command(
        'upload <paths..>',
        'Upload local files to the app and record them',
        (c) =>
          c
            .positional('paths', { type: 'string', array: true, demandOption: true })
            .option('prefix', { type: 'string', default: '', describe: 'Key prefix inside the bucket, for example photos/' }),
        run<FilesArgs & { paths: string[]; prefix: string }>(async (args) => {
          const instance = instanceOf(args);
          const token = tokenOf(args);
          const files = args.paths.map((p) => {
            let size: number;
            try {
              const stat = fs.statSync(p);
              if (!stat.isFile()) throw new Error('not a file');
              size = stat.size;
            } catch (err) {
              throw new ClientError(`${p}: ${(err as NodeJS.ErrnoException).code === 'ENOENT' ? 'no such file' : (err as Error).message}`);
            }
            const name = path.basename(p);
            const prefix = args.prefix.replace(/^\/+/, '').replace(/(?<!\/)$/, args.prefix ? '/' : '');
            const safe = name.replace(/[^\w.-]+/g, '_');
            return {
              path: p,
              name,
              size,
              type: TYPES[path.extname(name).toLowerCase()] ?? 'application/octet-stream',
              key: `${prefix}${randomUUID()}/${safe}`,
            };
          });
          const { s3, bucket } = await storeFor(instance, token);
          const { PutObjectCommand } = await import('@aws-sdk/client-s3');
          try {
            for (const f of files) {
              await s3.send(new PutObjectCommand({ Bucket: bucket, Key: f.key, Body: fs.readFileSync(f.path), ContentType: f.type }));
            }
          } catch (err) {
            throw new ClientError(`upload to the store failed: ${(err as Error).message}`);
          } finally {
            s3.destroy();
          }
          const recorded = await call<{ files: FileRecord[] }>(instance, 'POST', '/api/files', {
            body: { token, files: files.map(({ key, name, size, type }) => ({ key, name, size, type })) },
          });
          print(args, recorded.files.map((f) => `uploaded ${f.name} (${f.size} bytes) as ${f.key}`).join('\n'), recorded.files);
        }),
      )
      .command(
        'ls',
        "List the app's files, newest first",
        (c) =>
          c
            .option('search', { type: 'string', describe: 'Case-sensitive part of the name' })
            .option('page', { type: 'number', default: 1 })
            .option('page-size', { type: 'number', default: 20 }),
        run<FilesArgs & { search?: string; page: number; pageSize: number }>(async (args) => {
          const query = new URLSearchParams({ page: String(args.page), pageSize: String(args.pageSize) });
          if (args.search) query.set('search', args.search);
          const result = await call<{ files: FileRecord[]; pagination: { page: number; totalPages: number; total: number } }>(
            instanceOf(args),
            'GET',
            `/api/files?${query}`,
            { token: tokenOf(args) },
          );
          const rows = result.files.map((f) => [f.key, String(f.size), f.type, f.uploadedAt]);
          const { page, totalPages, total } = result.pagination;
          print(
            args,
            rows.length ? `${table(['KEY', 'SIZE', 'TYPE', 'UPLOADED'], rows)}\npage ${page} of ${totalPages} (${total} files)` : 'No files.',
            result,
          );
        }),
      )
      .command(
        'rm <keys..>',
        'Delete files (their objects, then their records)',
        (c) => c.positional('keys', { type: 'string', array: true, demandOption: true }),
        run<FilesArgs & { keys: string[] }>(async (args) => {
          await call(instanceOf(args), 'DELETE', '/api/files', { token: tokenOf(args), body: { keys: args.keys } });
          print(args, `deleted ${args.keys.length} file${args.keys.length === 1 ? '' : 's'}`, { deleted: args.keys });
        }),
      )
      .command(
        'get <key>',
        "Download a file's bytes from the store",
        (c) =>
          c
            .positional('key', { type: 'string', demandOption: true })
            .option('out', { type: 'string', describe: 'Where to write it (default: its name in the current directory)' }),
        run<FilesArgs & { key: string; out?: string }>(async (args) => {
          const { s3, bucket } = await storeFor(instanceOf(args), tokenOf(args));
          const { GetObjectCommand } = await import('@aws-sdk/client-s3');
          const out = args.out ?? path.basename(args.key);
          try {
            const got = await s3.send(new GetObjectCommand({ Bucket: bucket, Key: args.key }));
            const bytes = Buffer.from(await got.Body!.transformToByteArray());
            fs.writeFileSync(out, bytes);
            print(args, `wrote ${bytes.length} bytes to ${out}`, { key: args.key, out, size: bytes.length });
          } catch (err) {
            const name = (err as { name?: string }).name;
            throw new ClientError(name === 'NoSuchKey' ? `no file with key ${args.key}` : `download failed: ${(err as Error).message}`);
          } finally {
            s3.destroy();
          }
        }),
      )
      .demandCommand(1, 'name a files command'),
  );
}
