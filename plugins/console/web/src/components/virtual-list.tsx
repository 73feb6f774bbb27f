/**
 * A windowed list: of rows of one fixed height, only those in view (and a few around them) are in the DOM. A spacer
 * as tall as every row keeps the scrollbar true, and the drawn rows are moved to where the view is. 10,000 rows
 * cost as little to draw as 40.
 */
import type { ComponentChildren } from "preact";
import { useEffect, useLayoutEffect, useRef, useState } from "preact/hooks";

export interface VirtualListProps<T> {
  items: readonly T[];
  rowHeight: number;
  /** Rows drawn above and below the view, so a fast scroll shows no gap. */
  overscan?: number;
  keyOf: (item: T) => string;
  renderRow: (item: T, index: number) => ComponentChildren;
  /** When set, scrolls so this index is in view (once per change of the value). */
  scrollToIndex?: number;
  testid?: string;
  class?: string;
}

export function VirtualList<T>(props: VirtualListProps<T>) {
  const { items, rowHeight } = props;
  const overscan = props.overscan ?? 8;
  const box = useRef<HTMLDivElement>(null);
  const [scrollTop, setScrollTop] = useState(0);
  const [height, setHeight] = useState(600);

  // The view's height follows the element (CSS sets it); a ResizeObserver keeps the window right after a resize.
  useLayoutEffect(() => {
    const el = box.current;
    if (!el) return;
    setHeight(el.clientHeight || 600);
    const ro = new ResizeObserver(() => setHeight(el.clientHeight || 600));
    ro.observe(el);
    return () => ro.disconnect();
  }, []);

  // One state update per frame however many scroll events arrive.
  const frame = useRef(0);
  const onScroll = () => {
    if (frame.current) return;
    frame.current = requestAnimationFrame(() => {
      frame.current = 0;
      if (box.current) setScrollTop(box.current.scrollTop);
    });
  };
  useEffect(() => () => cancelAnimationFrame(frame.current), []);

  useEffect(() => {
    const el = box.current;
    const i = props.scrollToIndex;
    if (!el || i === undefined || i < 0) return;
    const top = i * rowHeight;
    if (top < el.scrollTop || top + rowHeight > el.scrollTop + el.clientHeight) {
      el.scrollTop = Math.max(0, top - el.clientHeight / 3);
      setScrollTop(el.scrollTop);
    }
  }, [props.scrollToIndex]);

  // A list that shrank below the scroll position (a group closed) is drawn from where the browser put the view.
  const maxTop = Math.max(0, items.length * rowHeight - height);
  const top = Math.min(scrollTop, maxTop);
  const first = Math.max(0, Math.floor(top / rowHeight) - overscan);
  const last = Math.min(items.length, Math.ceil((top + height) / rowHeight) + overscan);
  const shown = [];
  for (let i = first; i < last; i++) {
    const item = items[i]!;
    shown.push(
      <div key={props.keyOf(item)} class="vlist-item" style={{ height: `${rowHeight}px` }}>
        {props.renderRow(item, i)}
      </div>,
    );
  }
  return (
    <div ref={box} class={`vlist ${props.class ?? ""}`} data-testid={props.testid} data-rows={items.length} onScroll={onScroll}>
      <div class="vlist-spacer" style={{ height: `${items.length * rowHeight}px` }}>
        <div class="vlist-window" style={{ transform: `translateY(${first * rowHeight}px)` }}>
          {shown}
        </div>
      </div>
    </div>
  );
}
