import { createHash, type Hash } from "node:crypto";
import { eventLine } from "../../../src/adapters/surfaces/cli/eventFormat.js";
import type { RecordedEvent } from "../../../src/events/index.js";
import type { SseMessage } from "./client.js";

const frame = (id: string | undefined, event: string, data: string): string => `${id}\n${event}\n${data}\n`;

/**
 * What one client received, kept in constant memory: a digest of every message (id, event type,
 * data) in arrival order, and the first few ids that broke position order. 100 clients × 10,000
 * events are half a gigabyte of text; the digest compares all of it with what the journal holds.
 */
export class Received {
  count = 0;
  last = 0;
  readonly disorder: string[] = [];
  readonly #digest: Hash = createHash("sha256");

  readonly take = (message: SseMessage): void => {
    const position = Number(message.id);
    if (!(position > this.last) && this.disorder.length < 5)
      this.disorder.push(`${message.id} after ${this.last}`);
    this.last = Math.max(this.last, position);
    this.count++;
    this.#digest.update(frame(message.id, message.event, message.data));
  };

  digest(): string {
    return this.#digest.copy().digest("hex");
  }
}

/** The digest a client that received exactly `events`, in order, as `GET /api/events` sends them, has. */
export const digestOf = (events: ReadonlyArray<RecordedEvent>): string => {
  const digest = createHash("sha256");
  for (const e of events)
    digest.update(frame(String(e.position), e.event.type, JSON.stringify(eventLine(e))));
  return digest.digest("hex");
};

/** The same digest over messages kept whole. */
export const digestOfMessages = (messages: ReadonlyArray<SseMessage>): string => {
  const digest = createHash("sha256");
  for (const m of messages) digest.update(frame(m.id, m.event, m.data));
  return digest.digest("hex");
};

/** A message's position. */
export const positionOf = (message: SseMessage): number => Number(message.id);

/** Every message kept, for streams of a few thousand events. */
export const collector = (): { readonly messages: SseMessage[]; readonly take: (m: SseMessage) => void } => {
  const messages: SseMessage[] = [];
  return { messages, take: (message) => messages.push(message) };
};
