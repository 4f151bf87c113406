/** Where and as whom the SSH tool connects, and the host key it insists on. */
export interface SshTarget {
  readonly host: string;
  /** Default 22. */
  readonly port?: number;
  readonly user: string;
  /**
   * The host key the server must present, checked before authentication and before anything is
   * sent: a public key line (`ssh-ed25519 AAAA…`, a `known_hosts` line, or a `.pub` file's text) or
   * a fingerprint as `ssh-keygen -lf` prints it (`SHA256:…`). Several for a key rotation.
   * `ssh-keyscan -p PORT HOST | ssh-keygen -lf -` prints them.
   */
  readonly hostKey: string | ReadonlyArray<string>;
  /** A private key (OpenSSH or PEM text). A secret: register it in `openRuntime({ secrets })`. */
  readonly privateKey?: string | Buffer;
  /** The private key's passphrase, if it has one. A secret. */
  readonly passphrase?: string;
  /** The user's password, when no key is given. A secret. */
  readonly password?: string;
  /** Give up connecting (handshake and authentication) after this long; default 20 s. */
  readonly readyTimeoutMs?: number;
  /**
   * Send a keepalive this often (default 10 s); after 3 unanswered the connection counts as lost,
   * so a silent network cut ends an attempt (in doubt) instead of hanging it.
   */
  readonly keepaliveIntervalMs?: number;
}
