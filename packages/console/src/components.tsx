import { useEffect, useRef, type ReactNode } from 'react';

const TONES: Record<string, string> = {
  active: 'good',
  delivered: 'good',
  renewed: 'good',
  reauth_required: 'bad',
  revoked: 'bad',
  dead: 'bad',
  failed: 'bad',
  pending: 'warn',
  no_target: 'muted',
  filtered: 'muted',
  success: 'good',
  failure: 'bad',
  healthy: 'good',
  failing: 'warn',
  ready: 'good',
  initial: 'muted',
  paused: 'muted',
  disabled: 'bad',
};

/** A state in words and colour (the words carry it; the colour only helps). */
export function Badge({ value }: { value: string }) {
  return <span className={`badge badge-${TONES[value] ?? 'muted'}`}>{value.replace(/_/g, ' ')}</span>;
}

/** The page's heading: focused when the page opens, so a screen reader announces where the operator is. */
export function Heading({ children }: { children: ReactNode }) {
  const ref = useRef<HTMLHeadingElement>(null);
  useEffect(() => ref.current?.focus(), []);
  return (
    <h1 ref={ref} tabIndex={-1}>
      {children}
    </h1>
  );
}

export function ErrorNote({ error }: { error: string | null }) {
  return error ? (
    <p role="alert" className="note note-error">
      {error}
    </p>
  ) : null;
}

export function StatusNote({ message }: { message: string | null }) {
  return (
    <p role="status" className={message ? 'note note-ok' : 'visually-hidden'}>
      {message ?? ''}
    </p>
  );
}

/** A modal question before anything that cannot be undone; Cancel has the focus. */
export function ConfirmDialog(props: {
  open: boolean;
  title: string;
  children: ReactNode;
  confirm: string;
  onConfirm: () => void;
  onCancel: () => void;
}) {
  const ref = useRef<HTMLDialogElement>(null);
  useEffect(() => {
    const dialog = ref.current;
    if (!dialog) return;
    if (props.open && !dialog.open) dialog.showModal();
    if (!props.open && dialog.open) dialog.close();
  }, [props.open]);
  return (
    <dialog ref={ref} aria-labelledby="confirm-title" onCancel={props.onCancel}>
      <h2 id="confirm-title">{props.title}</h2>
      <div>{props.children}</div>
      <div className="actions">
        <button type="button" autoFocus onClick={props.onCancel}>
          Cancel
        </button>
        <button type="button" className="danger" onClick={props.onConfirm}>
          {props.confirm}
        </button>
      </div>
    </dialog>
  );
}
