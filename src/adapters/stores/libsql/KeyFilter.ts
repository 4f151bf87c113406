/**
 * A Bloom filter over strings: `mightHold` is false only for a key never added. It answers "not
 * there" without a database read for almost every key the audit asks its spill about (each new
 * projection row is asked for once), in a fixed amount of memory; a false "maybe" costs one read.
 */
export class KeyFilter {
  private readonly words: Uint32Array;
  private readonly mask: number;

  /** `bits`: rounded up to a power of two (default 2^25 bits, 4 MiB: under 1% false "maybe" at 2.5M keys). */
  constructor(bits = 2 ** 25) {
    let size = 32;
    while (size < bits) size *= 2;
    this.words = new Uint32Array(size / 32);
    this.mask = size - 1;
  }

  add(key: string): void {
    const [a, b] = hashes(key);
    for (let i = 0; i < PROBES; i++) {
      const bit = (a + i * b) & this.mask;
      this.words[bit >>> 5]! |= 1 << (bit & 31);
    }
  }

  mightHold(key: string): boolean {
    const [a, b] = hashes(key);
    for (let i = 0; i < PROBES; i++) {
      const bit = (a + i * b) & this.mask;
      if ((this.words[bit >>> 5]! & (1 << (bit & 31))) === 0) return false;
    }
    return true;
  }
}

const PROBES = 4;

/** Two 32-bit FNV-1a hashes with different offsets (double hashing gives the probes). */
const hashes = (key: string): [number, number] => {
  let a = 0x811c9dc5;
  let b = 0x01000193 ^ key.length;
  for (let i = 0; i < key.length; i++) {
    const c = key.charCodeAt(i);
    a = Math.imul(a ^ c, 0x01000193);
    b = Math.imul(b ^ c, 0x5bd1e995);
  }
  // An odd step visits distinct bits in a power-of-two table.
  return [a >>> 0, (b | 1) >>> 0];
};
