/**
 * Reads a fetch answer's body with a size cap, so an upstream that sends far more than it should cannot fill the
 * executor's memory: the body is read as a stream and abandoned at the cap.
 */

/** Thrown by `readResponseBytes` when the body passes the cap and `truncate` is false. */
export class ResponseTooLargeError extends Error {
  constructor(readonly limit: number) {
    super(`the answer is larger than ${limit} bytes`);
    this.name = "ResponseTooLargeError";
  }
}

/**
 * At most `limit` bytes of `res`'s body. Past it the rest is not read: with `truncate` the first `limit` bytes are
 * returned (enough for an error message), otherwise ResponseTooLargeError is thrown.
 */
export async function readResponseBytes(res: Response, limit: number, truncate: boolean): Promise<Uint8Array> {
  if (!res.body) return new Uint8Array(0);
  const declared = Number(res.headers.get("content-length") ?? NaN);
  if (!truncate && Number.isFinite(declared) && declared > limit) {
    await res.body.cancel().catch(() => undefined);
    throw new ResponseTooLargeError(limit);
  }
  const reader = res.body.getReader();
  const chunks: Uint8Array[] = [];
  let total = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    if (total + value.byteLength > limit) {
      await reader.cancel().catch(() => undefined);
      if (!truncate) throw new ResponseTooLargeError(limit);
      chunks.push(value.subarray(0, limit - total));
      total = limit;
      break;
    }
    chunks.push(value);
    total += value.byteLength;
  }
  const out = new Uint8Array(total);
  let at = 0;
  for (const chunk of chunks) {
    out.set(chunk, at);
    at += chunk.byteLength;
  }
  return out;
}
