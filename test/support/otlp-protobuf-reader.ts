/**
 * A minimal protobuf wire-format reader, enough to decode OTLP messages in tests
 * without a protobuf library or generated code.
 *
 * Wire types: 0 varint, 1 fixed64 (8 bytes little-endian), 2 length-delimited, 5 fixed32.
 * Groups (3, 4) are long deprecated and never used by OTLP; they are rejected.
 */

/** Thrown when the bytes are not a well-formed protobuf message of the expected shape. */
export class ProtobufDecodeError extends Error {
  override readonly name = "ProtobufDecodeError";
}

export const WIRE_VARINT = 0;
export const WIRE_FIXED64 = 1;
export const WIRE_LEN = 2;
export const WIRE_FIXED32 = 5;

const utf8 = new TextDecoder("utf-8", { fatal: true });

/** Reads the fields of one message in order; call nextField() then exactly one value reader (or skip()). */
export class ProtobufReader {
  private pos = 0;
  private wireType = -1;
  private fieldNumber = 0;

  constructor(private readonly buf: Uint8Array) {}

  /** The next field's number, or undefined at the end of the message. */
  nextField(): number | undefined {
    if (this.pos >= this.buf.length) return undefined;
    const tag = this.readRawVarint();
    if (tag > 0xffffffffn) throw new ProtobufDecodeError(`tag out of range at byte ${this.pos}`);
    const wireType = Number(tag & 7n);
    const fieldNumber = Number(tag >> 3n);
    if (fieldNumber === 0) throw new ProtobufDecodeError(`field number 0 at byte ${this.pos}`);
    if (wireType !== WIRE_VARINT && wireType !== WIRE_FIXED64 && wireType !== WIRE_LEN && wireType !== WIRE_FIXED32) {
      throw new ProtobufDecodeError(`unsupported wire type ${wireType} for field ${fieldNumber}`);
    }
    this.wireType = wireType;
    this.fieldNumber = fieldNumber;
    return fieldNumber;
  }

  /** Unsigned varint as a bigint (uint64 range). */
  uint64(): bigint {
    this.expect(WIRE_VARINT);
    return this.readRawVarint();
  }

  /** int64 (two's complement varint, not zigzag) as a bigint. */
  int64(): bigint {
    return BigInt.asIntN(64, this.uint64());
  }

  /** uint32 / enum values (enums are int32 on the wire; OTLP enums are never negative). */
  uint32(): number {
    return Number(BigInt.asUintN(32, this.uint64()));
  }

  bool(): boolean {
    return this.uint64() !== 0n;
  }

  fixed64(): bigint {
    this.expect(WIRE_FIXED64);
    const view = this.take(8);
    return new DataView(view.buffer, view.byteOffset, 8).getBigUint64(0, true);
  }

  double(): number {
    this.expect(WIRE_FIXED64);
    const view = this.take(8);
    return new DataView(view.buffer, view.byteOffset, 8).getFloat64(0, true);
  }

  fixed32(): number {
    this.expect(WIRE_FIXED32);
    const view = this.take(4);
    return new DataView(view.buffer, view.byteOffset, 4).getUint32(0, true);
  }

  /** Length-delimited bytes (also the body of an embedded message). */
  bytes(): Uint8Array {
    this.expect(WIRE_LEN);
    const length = this.readRawVarint();
    if (length > BigInt(this.buf.length - this.pos)) {
      throw new ProtobufDecodeError(`field ${this.fieldNumber} claims ${length} bytes, only ${this.buf.length - this.pos} left`);
    }
    return this.take(Number(length));
  }

  /** proto3 strings must be valid UTF-8; anything else is a malformed message. */
  string(): string {
    const raw = this.bytes();
    try {
      return utf8.decode(raw);
    } catch {
      throw new ProtobufDecodeError(`field ${this.fieldNumber} is not valid UTF-8`);
    }
  }

  /** A reader over an embedded message. */
  message(): ProtobufReader {
    return new ProtobufReader(this.bytes());
  }

  /** Skips the current field's value (unknown fields are ignored, as protobuf requires). */
  skip(): void {
    switch (this.wireType) {
      case WIRE_VARINT:
        this.readRawVarint();
        return;
      case WIRE_FIXED64:
        this.take(8);
        return;
      case WIRE_FIXED32:
        this.take(4);
        return;
      case WIRE_LEN:
        this.bytes();
        return;
      default:
        throw new ProtobufDecodeError("skip() called before nextField()");
    }
  }

  private expect(wireType: number): void {
    if (this.wireType !== wireType) {
      throw new ProtobufDecodeError(`field ${this.fieldNumber} has wire type ${this.wireType}, expected ${wireType}`);
    }
  }

  private take(length: number): Uint8Array {
    if (this.pos + length > this.buf.length) {
      throw new ProtobufDecodeError(`truncated field ${this.fieldNumber}: needs ${length} bytes at byte ${this.pos}`);
    }
    const slice = this.buf.subarray(this.pos, this.pos + length);
    this.pos += length;
    return slice;
  }

  private readRawVarint(): bigint {
    let result = 0n;
    for (let i = 0; i < 10; i++) {
      if (this.pos >= this.buf.length) throw new ProtobufDecodeError(`truncated varint at byte ${this.pos}`);
      const byte = this.buf[this.pos++]!;
      result |= BigInt(byte & 0x7f) << BigInt(7 * i);
      if ((byte & 0x80) === 0) return BigInt.asUintN(64, result);
    }
    throw new ProtobufDecodeError(`varint longer than 10 bytes at byte ${this.pos}`);
  }
}
