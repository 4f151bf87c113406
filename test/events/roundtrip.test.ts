import { Arbitrary, FastCheck as fc, Schema } from "effect";
import { describe, expect, it } from "vitest";
import {
  AnyEvent,
  canonicalJson,
  chainHash,
  decodeRow,
  EVENT_SCHEMA_VERSION,
  EVENT_TYPES,
  encodePayload,
  GENESIS_HASH,
} from "../../src/events/index.js";

const arbitraryEvent = Arbitrary.make(AnyEvent);

describe("events", () => {
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

  it("the property test reaches every event type", () => {
    const types = new Set(fc.sample(arbitraryEvent, 3000).map((e) => e.type));
    expect([...types].sort()).toEqual([...EVENT_TYPES].sort());
    for (const event of fc.sample(arbitraryEvent, 50)) expect(Schema.is(AnyEvent)(event)).toBe(true);
  });
});
