/**
 * Progress of a transfer on the command line: on a terminal, one bar on stderr redrawn in place
 * (at most ten times a second); elsewhere (a pipe, a log file, CI) nothing but the lines the
 * command prints as each file finishes, so logs stay readable.
 */
import { humanBytes } from './bytes.ts';

export interface ProgressOptions {
  totalBytes: number;
  totalFiles: number;
  /** Where the bar goes (stderr); drawn only when it is a terminal. */
  stream: NodeJS.WriteStream;
  /** Where finished-file lines go (stdout), or null for none (--json). */
  lines: NodeJS.WritableStream | null;
  /** Clock, for the rate. */
  now?: () => number;
}

export class Progress {
  readonly #options: ProgressOptions;
  readonly #tty: boolean;
  readonly #started: number;
  readonly #now: () => number;
  #bytes = 0;
  #files = 0;
  #drawn = 0;
  #visible = false;
  /** Something changed since the last frame. */
  #dirty = false;

  constructor(options: ProgressOptions) {
    this.#options = options;
    this.#tty = options.stream.isTTY === true;
    this.#now = options.now ?? Date.now;
    this.#started = this.#now();
  }

  /** Bytes moved (or found already in place). */
  add(bytes: number): void {
    this.#bytes += bytes;
    this.#dirty = true;
    this.#draw(false);
  }

  /** A file is finished: prints its line above the bar. */
  fileDone(line: string | null): void {
    this.#files++;
    this.#dirty = true;
    if (line !== null && this.#options.lines) {
      this.#clear();
      this.#options.lines.write(`${line}\n`);
    }
    this.#draw(true);
  }

  /** Draws the last frame and ends its line (before the summary and error lines). */
  finish(): void {
    if (this.#dirty) this.#draw(true);
    if (this.#visible) this.#options.stream.write('\n');
    this.#visible = false;
  }

  #clear(): void {
    if (this.#visible) this.#options.stream.write('\r\x1b[K');
    this.#visible = false;
  }

  #draw(force: boolean): void {
    if (!this.#tty) return;
    const now = this.#now();
    if (!force && now - this.#drawn < 100) return;
    this.#drawn = now;
    this.#dirty = false;
    const { totalBytes, totalFiles, stream } = this.#options;
    const ratio = totalBytes ? Math.min(1, this.#bytes / totalBytes) : this.#files / Math.max(1, totalFiles);
    const seconds = Math.max(0.001, (now - this.#started) / 1000);
    const text = ` ${String(Math.floor(ratio * 100)).padStart(3)}%  ${humanBytes(this.#bytes)} of ${humanBytes(totalBytes)}  ${this.#files}/${totalFiles} files  ${humanBytes(Math.round(this.#bytes / seconds))}/s`;
    const width = Math.max(10, Math.min(40, (stream.columns || 80) - text.length - 3));
    const filled = Math.round(ratio * width);
    stream.write(`\r[${'#'.repeat(filled)}${'-'.repeat(width - filled)}]${text}\x1b[K`);
    this.#visible = true;
  }
}
