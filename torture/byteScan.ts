import { readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";

/** A needle found in a file: which one (by label) and where. */
export interface ScanHit {
  readonly file: string;
  readonly label: string;
}

/** The forms a secret can take on disk: raw, JSON-escaped, URL-encoded. */
export const encodings = (secret: string): string[] => [
  ...new Set([secret, JSON.stringify(secret).slice(1, -1), encodeURIComponent(secret)]),
];

/** Every regular file under `roots` (recursively; missing roots are skipped). */
export const filesUnder = (roots: ReadonlyArray<string>): string[] => {
  const files: string[] = [];
  const walk = (path: string) => {
    let stats: ReturnType<typeof statSync>;
    try {
      stats = statSync(path);
    } catch {
      return;
    }
    if (stats.isDirectory()) for (const name of readdirSync(path)) walk(join(path, name));
    else if (stats.isFile()) files.push(path);
  };
  for (const root of roots) walk(root);
  return files;
};

/** Which of the labelled needles (each in every encoding) occur in the bytes of any file under `roots`. */
export const byteScan = (
  roots: ReadonlyArray<string>,
  needles: Readonly<Record<string, string>>,
): ScanHit[] => {
  const hits: ScanHit[] = [];
  const forms = Object.entries(needles).flatMap(([label, value]) =>
    encodings(value).map((form) => ({ label, bytes: Buffer.from(form, "utf8") })),
  );
  for (const file of filesUnder(roots)) {
    const data = readFileSync(file);
    for (const { label, bytes } of forms) if (data.includes(bytes)) hits.push({ file, label });
  }
  return hits;
};
