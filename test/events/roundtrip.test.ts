import { Arbitrary, FastCheck as fc, Schema } from "effect";
import { describe, expect, it } from "vitest";
import {
  AnyEvent,
  canonicalJson,
  chainHash,
  chainHashOfText,
  decodeRow,
  EVENT_SCHEMA_VERSION,
  EVENT_TYPES,
  encodePayload,
  GENESIS_HASH,
  rowHash,
  sha256Hex,
} from "../../src/events/index.js";

const arbitraryEvent = Arbitrary.make(AnyEvent);

describe("events", () => {
  it("a channel version that canonical JSON cannot carry (Infinity, NaN) is refused by the schema (found by the round-trip property, seed -179614130)", () => {
    for (const version of [Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY, Number.NaN]) {
      const event = {
        type: "graph.checkpointed",
        threadId: "",
        namespace: "",
        checkpointId: "",
        parentId: null,
        state: {
          checkpoint: { kind: "json", json: null },
          metadata: { kind: "bytes", type: "", base64: "" },
          channels: [{ channel: "", version, value: { kind: "json", json: "" } }],
        },
      };
      expect(Schema.is(AnyEvent)(event), String(version)).toBe(false);
      expect(
        Schema.is(AnyEvent)({
          ...event,
          state: { ...event.state, channels: [{ ...event.state.channels[0], version: 3 }] },
        }),
      ).toBe(true);
    }
  });

  it("a retry policy's backoff factor that canonical JSON cannot carry (Infinity, NaN) is refused by the schema (found by the round-trip property, seed 544219887)", () => {
    const intent = (factor: number) => ({
      type: "call.intended",
      runId: "",
      callId: "",
      seq: 0,
      attempt: 1,
      kind: "document",
      name: "",
      args: "",
      fingerprint: "a".repeat(64),
      disposition: "hold",
      pin: null,
      reconciler: null,
      idempotencyKey: "",
      retry: { attempts: 1, backoff: { initialMs: 0, maxMs: 0, factor, jitter: 0 }, when: "custom" },
    });
    for (const factor of [Number.POSITIVE_INFINITY, Number.NaN])
      expect(Schema.is(AnyEvent)(intent(factor)), String(factor)).toBe(false);
    expect(Schema.is(AnyEvent)(intent(2))).toBe(true);
  });

  it("every event round-trips through encode, canonical JSON, storage and decode", () => {
    fc.assert(
      fc.property(arbitraryEvent, (event) => {
        const data = encodePayload(event);
        const text = canonicalJson(data);
        const row = {
          streamId: "s",
          version: 1,
          position: 1,
          eventId: "e",
          recordedAt: "2026-01-01T00:00:00.000Z",
          prevHash: GENESIS_HASH,
          hash: chainHash({
            streamId: "s",
            version: 1,
            eventId: "e",
            recordedAt: "2026-01-01T00:00:00.000Z",
            prevHash: GENESIS_HASH,
            schemaVersion: EVENT_SCHEMA_VERSION,
            data,
          }),
          schemaVersion: EVENT_SCHEMA_VERSION,
          data: text,
        };
        const decoded = decodeRow(row).event;
        expect(decoded).toEqual(JSON.parse(JSON.stringify(event)));
        expect(canonicalJson(encodePayload(decoded))).toBe(text);
      }),
      { numRuns: 500 },
    );
  });

  it("the hash built around the payload's canonical text equals the hash of the canonical envelope, for any ids and payload", () => {
    // Full Unicode (lone surrogates included), integers of any size JSON keeps exactly.
    const text = fc.string({ unit: "binary" });
    fc.assert(
      fc.property(
        fc.record({
          streamId: text,
          version: fc.integer({ min: 1, max: Number.MAX_SAFE_INTEGER }),
          eventId: text,
          recordedAt: text,
          prevHash: text,
          schemaVersion: fc.integer({ min: 0, max: 1000 }),
        }),
        fc.jsonValue(),
        (fields, data) => {
          const dataText = canonicalJson(data);
          // The definition (DESIGN §4), computed independently: canonical JSON of the whole envelope.
          const hash = sha256Hex(fields.prevHash + canonicalJson({ ...fields, data }));
          expect(chainHashOfText(fields, dataText)).toBe(hash);
          expect(chainHash({ ...fields, data })).toBe(hash);
          // And rowHash agrees on a stored row, by its fast path or its slow one.
          expect(rowHash({ ...fields, position: 1, hash, data: dataText })).toBe(hash);
          expect(
            rowHash({ ...fields, position: 1, hash, data: JSON.stringify(data, null, 1) ?? "null" }),
          ).toBe(hash);
        },
      ),
      { numRuns: 1000 },
    );
  });

  it("the property test reaches every event type", () => {
    const types = new Set(fc.sample(arbitraryEvent, 3000).map((e) => e.type));
    expect([...types].sort()).toEqual([...EVENT_TYPES].sort());
    for (const event of fc.sample(arbitraryEvent, 50)) expect(Schema.is(AnyEvent)(event)).toBe(true);
  });
});
