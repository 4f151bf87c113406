import { createCipheriv, createDecipheriv, randomBytes } from "node:crypto";
import { describe, expect, it } from "vitest";
import { Keyring, SealError } from "../../src/events/index.js";

/** The parts of a stored sealed value: format, key id, then the format's own fields. */
const partsOf = (sealed: string): string[] => sealed.split(".");

describe("sealing keys (AES-GCM nonce budget)", () => {
  it("F13: seals use keys derived from a fresh random salt, each for at most sealsPerSubkey values, so no key nears the 2^32 random-IV limit", () => {
    const master = randomBytes(32);
    const ring = new Keyring(master, [], { sealsPerSubkey: 3 });
    const sealed = Array.from({ length: 7 }, (_, i) => ring.seal(`value ${i}`, `aad ${i}`));
    const salts = sealed.map((s) => partsOf(s)[2]);
    // 3 + 3 + 1 seals: three subkeys, each salt used by consecutive seals only.
    expect(salts.slice(0, 3).every((s) => s === salts[0])).toBe(true);
    expect(salts.slice(3, 6).every((s) => s === salts[3])).toBe(true);
    expect(new Set(salts).size).toBe(3);
    // Every value opens again, with its own associated data only.
    for (const [i, value] of sealed.entries()) {
      expect(ring.open(value, `aad ${i}`)).toBe(`value ${i}`);
      expect(() => ring.open(value, `aad ${i + 1}`)).toThrow(SealError);
    }
    // The master key itself never encrypts a value: AES-GCM with it and the stored IV does not open it.
    const [, , , iv, body] = partsOf(sealed[0]!);
    const bytes = Buffer.from(body!, "base64url");
    const direct = createDecipheriv("aes-256-gcm", master, Buffer.from(iv!, "base64url"));
    direct.setAAD(Buffer.from("aad 0"));
    direct.setAuthTag(bytes.subarray(bytes.length - 16));
    expect(() =>
      Buffer.concat([direct.update(bytes.subarray(0, bytes.length - 16)), direct.final()]),
    ).toThrow();
    // Another process (another ring on the same key) opens them too, and draws its own salts.
    const other = new Keyring(master);
    expect(other.open(sealed[6]!, "aad 6")).toBe("value 6");
    expect(partsOf(other.seal("x", "a"))[2]).not.toBe(salts[6]);
  });

  it("a value sealed in the first format (hf1: the master key and a random IV) still opens", () => {
    const master = randomBytes(32);
    const ring = new Keyring(master);
    const iv = randomBytes(12);
    const cipher = createCipheriv("aes-256-gcm", master, iv);
    cipher.setAAD(Buffer.from("where"));
    const body = Buffer.concat([cipher.update('"old"', "utf8"), cipher.final(), cipher.getAuthTag()]);
    const legacy = `hf1.${ring.currentId}.${iv.toString("base64url")}.${body.toString("base64url")}`;
    expect(ring.open(legacy, "where")).toBe('"old"');
    expect(() => ring.open(legacy, "elsewhere")).toThrow(SealError);
  });
});
