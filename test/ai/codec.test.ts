import { describe, expect, it } from "vitest";
import { fromStored, toStored } from "../../src/adapters/integrations/ai/codec.js";
import { canonicalJson } from "../../src/events/index.js";

describe("the stored form of AI SDK values", () => {
  it("revives dates, bytes, URLs and errors, and leaves undefined properties out", () => {
    const value = {
      timestamp: new Date("2026-01-02T03:04:05.000Z"),
      data: new Uint8Array([0, 1, 2, 250]),
      url: new URL("https://example.com/a.png"),
      error: Object.assign(new Error("overloaded"), { name: "AI_APICallError" }),
      missing: undefined,
      nested: [{ at: new Date(0) }, undefined],
    };
    const stored = toStored(value);
    expect(JSON.parse(canonicalJson(stored))).toEqual(stored);
    const revived = fromStored(stored) as typeof value;
    expect(revived.timestamp).toEqual(value.timestamp);
    expect(revived.data).toEqual(value.data);
    expect(revived.url.href).toBe("https://example.com/a.png");
    expect(revived.error).toBeInstanceOf(Error);
    expect([revived.error.name, revived.error.message]).toEqual(["AI_APICallError", "overloaded"]);
    expect("missing" in revived).toBe(false);
    expect(revived.nested).toEqual([{ at: new Date(0) }, null]);
  });

  it("keeps an object that has a $holdfast key of its own as it was", () => {
    const value = { $holdfast: "date", value: "not a date" };
    expect(fromStored(JSON.parse(JSON.stringify(toStored(value))))).toEqual(value);
  });

  it("stores bytes the same way every time, so a prompt with a file has one fingerprint", () => {
    const prompt = () => [
      {
        role: "user",
        content: [{ type: "file", mediaType: "image/png", data: new Uint8Array([137, 80, 78, 71]) }],
      },
    ];
    expect(canonicalJson(toStored(prompt()))).toBe(canonicalJson(toStored(prompt())));
  });

  it("R10: a __proto__ key is stored and revived as data, and neither copy inherits from it", () => {
    const value = JSON.parse('{"a":1,"__proto__":{"approved":true}}');
    const stored = toStored(value) as Record<string, unknown>;
    expect(stored.approved).toBeUndefined();
    expect(JSON.stringify(stored)).toBe('{"a":1,"__proto__":{"approved":true}}');
    const revived = fromStored(JSON.parse(JSON.stringify(stored))) as Record<string, unknown>;
    expect(revived.approved).toBeUndefined();
    expect(Object.getPrototypeOf(revived)).toBe(Object.prototype);
    expect(Object.keys(revived)).toEqual(["a", "__proto__"]);
  });

  it("refuses values that have no stored form", () => {
    expect(() => toStored({ f: () => 1 })).toThrow(TypeError);
    expect(() => toStored({ n: 1n })).toThrow(TypeError);
  });
});
