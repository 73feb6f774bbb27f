/** An instant as "3 min ago", with the exact time on hover. */
export function When({ iso }: { iso: string | undefined }) {
  if (!iso) return <span class="muted">—</span>;
  const t = Date.parse(iso);
  if (Number.isNaN(t)) return <span>{iso}</span>;
  return (
    <time dateTime={iso} title={new Date(t).toLocaleString()}>
      {ago(Date.now() - t)}
    </time>
  );
}

function ago(ms: number): string {
  const s = Math.round(ms / 1000);
  if (s < 5) return "just now";
  if (s < 60) return `${s} s ago`;
  const m = Math.round(s / 60);
  if (m < 60) return `${m} min ago`;
  const h = Math.round(m / 60);
  if (h < 48) return `${h} h ago`;
  return `${Math.round(h / 24)} days ago`;
}
