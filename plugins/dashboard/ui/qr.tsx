/**
 * A QR code drawn on a canvas from the pairing string the network gave, with the same encoder the
 * server uses for its QR images (qr, no network).
 */
import encodeQR from 'qr';
import { useEffect, useRef } from 'preact/hooks';

/** Pixels per module, and the quiet zone in modules the standard asks for around the code. */
const SCALE = 6;
const QUIET = 4;

export function QrCode({ value, label }: { value: string; label: string }) {
  const canvas = useRef<HTMLCanvasElement>(null);
  useEffect(() => {
    const el = canvas.current;
    const g = el?.getContext('2d');
    if (!el || !g) return;
    // The raw matrix includes the quiet zone (border, in modules).
    const modules = encodeQR(value, 'raw', { border: QUIET });
    const size = modules.length * SCALE;
    el.width = size;
    el.height = size;
    g.fillStyle = '#fff';
    g.fillRect(0, 0, size, size);
    g.fillStyle = '#000';
    modules.forEach((row, y) => {
      row.forEach((dark, x) => {
        if (dark) g.fillRect(x * SCALE, y * SCALE, SCALE, SCALE);
      });
    });
  }, [value]);
  return <canvas ref={canvas} class="qr" role="img" aria-label={label} data-qr={value} />;
}
