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

  it("R10: a __proto__ key is kept as data, and the copy inherits nothing from it", () => {
    const value = JSON.parse('{"a":1,"__proto__":{"isAdmin":true,"password":"x"}}');
    const masked = masker.mask(value) as Record<string, unknown>;
    expect(Object.keys(masked)).toEqual(["a", "__proto__"]);
    expect(Object.getPrototypeOf(masked)).toBe(Object.prototype);
    expect(masked.isAdmin).toBeUndefined();
    expect(JSON.stringify(masked)).toBe(
      '{"a":1,"__proto__":{"isAdmin":true,"password":"«secret:password»"}}',
    );
  });

  it("maskStrings masks registered secrets and token shapes but not by key name: maps keyed by names that hold no secret keep their values", () => {
    expect(masker.maskStrings({ password: 3, versions: { api_key: "v2" }, note: "pg-pass-42" })).toEqual({
      password: 3,
      versions: { api_key: "v2" },
      note: "«secret:DB»",
    });
  });

  it("registeredIn finds a registered secret, raw or encoded, inside bytes", () => {
    expect(masker.registeredIn(Uint8Array.from([0xff, ...Buffer.from("x=pg-pass-42")]))).toBe("DB");
    expect(masker.registeredIn(Buffer.from(JSON.stringify({ k: "rk_live_51Habcdef" })))).toBe("STRIPE");
    expect(masker.registeredIn(Uint8Array.from([0xff, 0xfe, 1]))).toBeNull();
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

  it("F8: credentials in URL user-info and secret query parameters are masked in any string", () => {
    const m = makeMasker({});
    // The review's three forms (law8 third case).
    expect(m.maskString("postgres://app:hunter2-very-secret@db:5432/x")).toBe(
      "postgres://app:«secret:url-password»@db:5432/x",
    );
    expect(m.maskString("https://api.example.com/v1?api_key=abcd1234efgh5678")).toBe(
      "https://api.example.com/v1?api_key=«secret:api_key»",
    );
    expect(m.mask({ url: "https://u:p4ssw0rd-long@host/" }).url).toBe(
      "https://u:«secret:url-password»@host/",
    );
    // An empty user, a raw `@` in the password (WHATWG URL reads up to the last `@`), inside a sentence.
    expect(m.maskString("failed: postgres://:s3cr3t-pw@db/x (refused)")).toBe(
      "failed: postgres://:«secret:url-password»@db/x (refused)",
    );
    expect(m.maskString("postgres://app:p@ss-s3cr3t@db/x")).toBe("postgres://app:«secret:url-password»@db/x");
    // Query and form credentials, whatever the position and case.
    expect(m.maskString("postgres://db/x?user=app&password=s3cr3t-pw&schema=s")).toBe(
      "postgres://db/x?user=app&password=«secret:password»&schema=s",
    );
    expect(
      m.maskString("GET /a?X-Amz-Signature=0a1b2c3d&sig=zz99&Token=t0k3n&sslpassword=k3y&key=AIzaLike"),
    ).toBe(
      "GET /a?X-Amz-Signature=«secret:X-Amz-Signature»&sig=«secret:sig»&Token=«secret:Token»&sslpassword=«secret:sslpassword»&key=«secret:key»",
    );
    expect(m.maskString("login failed: password=hunter2 for ada")).toBe(
      "login failed: password=«secret:password» for ada",
    );
    // Ordinary URLs and parameters stay as they are.
    for (const plain of [
      "http://example.com:8080/path?page=2&q=tokens",
      "see https://docs.example.com/a@b",
      "maxTokens=512 sort=key",
      "mailto:ada@example.com",
      // Masked already, as maskUrl prints a store URL.
      "postgres://app:****@db/x?password=****",
    ])
      expect(m.maskString(plain)).toBe(plain);
  });

  it("F8: a registered secret is masked in its raw, JSON-escaped and URL-encoded forms", () => {
    const secret = 'p@ss "w/rd" 100%+ü';
    const m = makeMasker({ DB: secret });
    const userinfo = new URL("postgres://h");
    userinfo.password = secret;
    const forms = [
      secret,
      JSON.stringify(secret).slice(1, -1),
      JSON.stringify(secret).slice(1, -1).replace("ü", "\\u00fc"),
      encodeURIComponent(secret),
      encodeURIComponent(secret).toLowerCase(),
      new URLSearchParams({ p: secret }).toString().slice("p=".length),
      userinfo.password,
    ];
    expect(new Set(forms).size).toBe(forms.length);
    for (const form of forms)
      expect(m.maskString(`before ${form} after`), form).toBe("before «secret:DB» after");
    // The JSON text of a body that carried the secret, stored as a string.
    const body = JSON.stringify({ connection: { pass: secret } });
    expect(m.mask({ body }).body).not.toContain("w/rd");
  });
});
