/** A QR code drawn on a canvas from the pairing string the network gave (lean-qr, no network). */
import { generate } from 'lean-qr';
import { useEffect, useRef } from 'preact/hooks';

export function QrCode({ value, label }: { value: string; label: string }) {
  const canvas = useRef<HTMLCanvasElement>(null);
  useEffect(() => {
    if (canvas.current) generate(value).toCanvas(canvas.current);
  }, [value]);
  return <canvas ref={canvas} class="qr" role="img" aria-label={label} data-qr={value} />;
}
