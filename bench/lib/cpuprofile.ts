/**
 * Summarise a V8 CPU profile: self time by component (the libsql driver, xstate, effect, canonical
 * JSON, hashing, holdfast's layers), by function, and inclusive time by function, so the
 * performance notes can say what dominates from a profile rather than a guess.
 *
 * Time in synchronous native calls (the libsql driver, including the fsync of a COMMIT) counts as
 * the JS function that made the call, e.g. `exec` or `run` of `libsql/index.js`.
 */

interface ProfileNode {
  readonly id: number;
  readonly callFrame: { readonly functionName: string; readonly url: string; readonly lineNumber: number };
  readonly children?: ReadonlyArray<number>;
}

export interface CpuProfile {
  readonly nodes: ReadonlyArray<ProfileNode>;
  readonly samples?: ReadonlyArray<number>;
  readonly timeDeltas?: ReadonlyArray<number>;
}

const shortUrl = (url: string): string =>
  url
    .replace(/^file:\/\//, "")
    .replace(/.*node_modules\//, "")
    .replace(/.*?\/(src|bench|test)\//, "$1/");

const keyOf = (n: ProfileNode): string =>
  `${n.callFrame.functionName || "(anonymous)"}  ${shortUrl(n.callFrame.url)}${n.callFrame.url ? `:${n.callFrame.lineNumber + 1}` : ""}`;

/** Which component a function belongs to. */
const componentOf = (n: ProfileNode): string => {
  const url = n.callFrame.url;
  const name = n.callFrame.functionName;
  if (!url) return name.startsWith("(") ? name : "(native / V8)";
  if (url.includes("node_modules/libsql/")) return `libsql driver: ${name}`;
  const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(url);
  if (pkg) return `npm: ${pkg[1]}`;
  if (url.startsWith("node:internal/crypto") || url === "node:crypto") return "node: crypto (hashing)";
  if (url.startsWith("node:")) return "node: internals";
  const layer = /\/(src\/[^/]+(?:\/[^/.]+)?)\//.exec(url) ?? /\/(src|bench)\//.exec(url);
  return layer?.[1] ?? "other";
};

export const summarizeProfile = (
  profile: CpuProfile,
  options: { readonly top?: number; readonly focus?: string } = {},
): string => {
  const top = options.top ?? 25;
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const self = new Map<number, number>();
  (profile.samples ?? []).forEach((id, i) => {
    self.set(id, (self.get(id) ?? 0) + (profile.timeDeltas?.[i] ?? 0));
  });
  const selfBy = new Map<string, number>();
  const inclusiveBy = new Map<string, number>();
  const componentBy = new Map<string, number>();
  let total = 0;
  for (const [id, micros] of self) {
    const stack: ProfileNode[] = [];
    for (let cur: number | undefined = id; cur !== undefined; cur = parent.get(cur))
      stack.push(byId.get(cur)!);
    if (options.focus && !stack.some((n) => n.callFrame.functionName === options.focus)) continue;
    total += micros;
    const leaf = stack[0]!;
    const add = (map: Map<string, number>, key: string) => map.set(key, (map.get(key) ?? 0) + micros);
    add(selfBy, keyOf(leaf));
    add(componentBy, componentOf(leaf));
    for (const key of new Set(stack.map(keyOf))) add(inclusiveBy, key);
  }
  const section = (title: string, map: Map<string, number>): string =>
    [
      `\n${title}`,
      ...[...map]
        .sort((a, b) => b[1] - a[1])
        .slice(0, top)
        .map(
          ([key, micros]) =>
            `${((micros / total) * 100).toFixed(1).padStart(6)}%  ${(micros / 1000).toFixed(0).padStart(7)} ms  ${key}`,
        ),
    ].join("\n");
  return [
    `${(total / 1000).toFixed(0)} ms sampled${options.focus ? ` under ${options.focus}` : ""}`,
    section("self time by component", componentBy),
    section("self time by function", selfBy),
    section("inclusive time by function", inclusiveBy),
    "",
  ].join("\n");
};
