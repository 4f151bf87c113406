import { describe, expect, it } from "vitest";
import { fingerprintOf, makeMasker } from "../../src/events/index.js";

describe("masking", () => {
  const masker = makeMasker({ STRIPE: "rk_live_51Habcdef", DB: "pg-pass-42" });

  it("replaces registered secret values, also inside longer strings", () => {
    expect(masker.mask({ url: "postgres://app:pg-pass-42@db/app", key: "rk_live_51Habcdef" })).toEqual({
      url: "postgres://app:«secret:DB»@db/app",
      key: "«secret:STRIPE»",
    });
  });

  it("replaces the values of secret-named keys at any depth, whatever their type", () => {
    expect(
      masker.mask({
        user: "ada",
        password: "x",
        nested: [{ api_key: 12345 }, { Authorization: "Basic abc" }],
        dbPassword: "y",
      }),
    ).toEqual({
      user: "ada",
      password: "«secret:password»",
      nested: [{ api_key: "«secret:api_key»" }, { Authorization: "«secret:Authorization»" }],
      dbPassword: "«secret:dbPassword»",
    });
  });

  it("does not mask ordinary keys that merely contain the word token", () => {
    expect(masker.mask({ maxTokens: 512, usage: { total_tokens: 9 } })).toEqual({
      maxTokens: 512,
      usage: { total_tokens: 9 },
    });
  });

  it("replaces well-known token shapes wherever they appear", () => {
    const text = [
      "Authorization: Bearer abcdefghijklmnop1234",
      "sk-proj-ABCDEFGHIJKLMNOPQRSTUVWX",
      "ghp_abcdefghijklmnopqrstuvwxyz0123456789",
      "AKIAABCDEFGHIJKLMNOP",
      "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
    ].join("\n");
    const masked = masker.maskString(text);
    expect(masked).toBe(
      [
        "Authorization: Bearer «secret:bearer»",
        "«secret:api-key»",
        "«secret:github-token»",
        "«secret:aws-access-key»",
        "«secret:jwt»",
      ].join("\n"),
    );
  });

  it("refuses to register a secret too short to mask safely", () => {
    expect(() => makeMasker({ PIN: "42" })).toThrow(/shorter than/);
  });

  it("a changed secret changes the fingerprint although the secret itself is never stored", () => {
    const key = new Uint8Array(32).fill(7);
    const a = fingerprintOf(key, { kind: "tool", name: "login", args: { password: "one" } });
    const b = fingerprintOf(key, { kind: "tool", name: "login", args: { password: "two" } });
    expect(a).not.toBe(b);
    expect(a).toMatch(/^[0-9a-f]{64}$/);
    // Keyed: without the journal's key the fingerprint cannot be recomputed.
    expect(
      fingerprintOf(new Uint8Array(32), { kind: "tool", name: "login", args: { password: "one" } }),
    ).not.toBe(a);
  });
});
