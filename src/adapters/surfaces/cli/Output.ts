/**
 * Line output that waits when the reader is slower than we write (`holdfast events | less`), so a
 * long listing streams through bounded memory instead of piling up in the stream's buffer.
 */
export class Output {
  constructor(private readonly stream: NodeJS.WritableStream) {}

  async line(text = ""): Promise<void> {
    if (!this.stream.write(`${text}\n`)) {
      await new Promise<void>((resolve) => {
        const done = () => {
          this.stream.off("drain", done);
          this.stream.off("close", done);
          this.stream.off("error", done);
          resolve();
        };
        this.stream.once("drain", done);
        this.stream.once("close", done);
        this.stream.once("error", done);
      });
    }
  }

  async lines(texts: Iterable<string>): Promise<void> {
    for (const text of texts) await this.line(text);
  }

  /** One JSON document, indented for people who read it too. */
  json(value: unknown): Promise<void> {
    return this.line(JSON.stringify(value, null, 2));
  }
}

export interface Io {
  readonly out: Output;
}
