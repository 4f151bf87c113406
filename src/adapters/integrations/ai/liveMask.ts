import { fromStored, toStored } from "./codec.js";
import type { StreamPart } from "./types.js";

type Delta = Extract<StreamPart, { type: "text-delta" | "reasoning-delta" | "tool-input-delta" }>;
const isDelta = (part: { readonly type: string }): part is Delta =>
  part.type === "text-delta" || part.type === "reasoning-delta" || part.type === "tool-input-delta";

/** The delta type whose block an end part closes. */
const ENDS: Readonly<Record<string, Delta["type"]>> = {
  "text-end": "text-delta",
  "reasoning-end": "reasoning-delta",
  "tool-input-end": "tool-input-delta",
};

/**
 * A tool call's input as the journal keeps it. The input is JSON text, where masking the text would
 * not see a secret under its key name (`{"password":"…"}`): it is parsed, masked as a value (key
 * names, registered secrets, token shapes) and written again. Text unchanged by that masking is
 * kept as the provider wrote it; text that is not JSON is masked as a string.
 */
export const maskToolInput = (mask: <A>(value: A) => A, input: string): string => {
  let parsed: unknown;
  try {
    parsed = JSON.parse(input);
  } catch {
    return mask(input);
  }
  const masked = JSON.stringify(mask(parsed));
  return masked === JSON.stringify(parsed) ? mask(input) : masked;
};

/** Keep a stored part, merging a delta into the one before it of the same block. */
const keep = (parts: Array<Record<string, unknown>>, part: Record<string, unknown>): void => {
  const last = parts.at(-1);
  if (
    last &&
    isDelta(part as { type: string }) &&
    last.type === part.type &&
    last.id === part.id &&
    last.providerMetadata === undefined &&
    part.providerMetadata === undefined
  ) {
    parts[parts.length - 1] = { ...last, delta: `${last.delta}${part.delta}` };
    return;
  }
  parts.push(part);
};

interface Block {
  /** The block's text as the provider sent it so far. */
  raw: string;
  /** What of its masked text the caller has. */
  sent: string;
}

/**
 * A model's stream as the journal stores it, sent to the caller as it comes (decisions 0002, 0036):
 * every part masked, and each text, reasoning or tool-input block masked as a whole. Masking a
 * piece alone would miss a token cut between two deltas, so a block's masked text goes out up to
 * its last whitespace, and the rest when the block ends; a secret shape does not span whitespace,
 * so what went out stays a prefix of the block's masked text. Where one did (a private key block,
 * a quoted password, a registered secret with spaces), `diverged` says so. A tool-input block is
 * JSON whose secrets may be known only by their key, once the block is whole: it goes out in one
 * piece when it ends, masked as a tool call's input is.
 */
export class LiveMask {
  /** The parts in their stored form, deltas merged: what the call's outcome records. */
  readonly parts: Array<Record<string, unknown>> = [];
  private readonly blocks = new Map<string, Block>();
  private split = false;

  constructor(
    private readonly mask: <A>(value: A) => A,
    private readonly send: (part: StreamPart) => void,
  ) {}

  /** Whether the caller saw text the journal will not hold as it was sent. */
  get diverged(): boolean {
    return this.split;
  }

  /** Take one part from the provider; `live` false keeps it for the outcome only. */
  add(part: StreamPart, live = true): void {
    if (isDelta(part)) {
      const key = `${part.type}:${part.id}`;
      const block = this.blocks.get(key) ?? { raw: "", sent: "" };
      this.blocks.set(key, block);
      block.raw += part.delta;
      // Without new whitespace the cut cannot move on: masking again would only cost time.
      if (/\s/.test(part.delta) || part.providerMetadata !== undefined) this.flush(part, block, false, live);
      return;
    }
    const closes = ENDS[part.type];
    if (closes !== undefined && "id" in part) this.close(`${closes}:${part.id}`, live);
    const whole = part.type === "tool-call" ? { ...part, input: maskToolInput(this.mask, part.input) } : part;
    this.emit(this.mask(toStored(whole)) as Record<string, unknown>, live);
  }

  /** Close every block still open: the stream is over (a provider may leave out the end parts). */
  end(live = true): void {
    for (const key of [...this.blocks.keys()]) this.close(key, live);
  }

  private close(key: string, live: boolean): void {
    const block = this.blocks.get(key);
    if (!block) return;
    this.blocks.delete(key);
    const at = key.indexOf(":");
    const type = key.slice(0, at) as Delta["type"];
    this.flush({ type, id: key.slice(at + 1), delta: "" } as Delta, block, true, live);
  }

  private flush(part: Delta, block: Block, final: boolean, live: boolean): void {
    const masked =
      part.type !== "tool-input-delta"
        ? this.mask(block.raw)
        : final
          ? maskToolInput(this.mask, block.raw)
          : block.sent;
    if (!masked.startsWith(block.sent)) {
      this.split = true;
      return;
    }
    const cut = final ? masked.length : masked.search(/\s\S*$/) + 1;
    const metadata =
      part.providerMetadata === undefined
        ? {}
        : { providerMetadata: this.mask(toStored(part.providerMetadata)) };
    if (cut <= block.sent.length && part.providerMetadata === undefined) return;
    const piece = cut > block.sent.length ? masked.slice(block.sent.length, cut) : "";
    block.sent += piece;
    this.emit({ type: part.type, id: part.id, delta: piece, ...metadata }, live);
  }

  private emit(stored: Record<string, unknown>, live: boolean): void {
    keep(this.parts, stored);
    if (live) this.send(fromStored(stored) as StreamPart);
  }
}
