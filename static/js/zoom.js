/* Synchronised zoom over the two images of a pair (workbench and review): one scale and one origin for both,
   so the same spot is always under the same place. Scroll on an image zooms, the pointer pans. */
window.syncZoom = function (images, boxes) {
  const zoom = { scale: 1, x: 50, y: 50 };
  function render() {
    for (const img of images) {
      img.style.transformOrigin = `${zoom.x}% ${zoom.y}%`;
      img.style.transform = zoom.scale === 1 ? "" : `scale(${zoom.scale})`;
    }
  }
  function set(scale) {
    zoom.scale = Math.min(8, Math.max(1, scale));
    if (zoom.scale === 1) { zoom.x = 50; zoom.y = 50; }
    render();
  }
  for (const box of boxes) {
    const point = (event) => {
      const rect = box.getBoundingClientRect();
      zoom.x = Math.min(100, Math.max(0, ((event.clientX - rect.left) / rect.width) * 100));
      zoom.y = Math.min(100, Math.max(0, ((event.clientY - rect.top) / rect.height) * 100));
    };
    box.addEventListener("wheel", (event) => {
      event.preventDefault();
      point(event);
      set(zoom.scale * (event.deltaY < 0 ? 1.25 : 0.8));
    }, { passive: false });
    box.addEventListener("mousemove", (event) => {
      if (zoom.scale > 1) { point(event); render(); }
    });
  }
  return {
    in: () => set(zoom.scale * 1.25),
    out: () => set(zoom.scale * 0.8),
    reset: () => set(1),
  };
};
