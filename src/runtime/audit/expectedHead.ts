/** An anchor: the head digest recorded earlier, optionally as of a position (`D@P`). */
export interface ExpectedHead {
  readonly digest: string;
  /** The log position the digest was taken at; null: the digest of the log's current heads. */
  readonly position: number | null;
}

/**
 * Parse an anchored head digest, `D` or `D@P` (as `holdfast audit` prints it); null when it is neither.
 *
 * @example
 * const expectHead = parseExpectedHead(readFileSync("anchored-head.txt", "utf8"));
 * if (!expectHead) throw new Error("not a head digest");
 * const report = await auditJournal(journal, { expectHead });
 */
export const parseExpectedHead = (text: string): ExpectedHead | null => {
  const match = /^([0-9a-f]{64})(?:@(\d+))?$/.exec(text.trim().toLowerCase());
  if (!match) return null;
  return { digest: match[1]!, position: match[2] === undefined ? null : Number(match[2]) };
};
