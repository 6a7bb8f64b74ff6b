//! The QR code presentation mode shows, so that a class opens the same demo from their phones:
//! the page's link to the open lesson (`?lesson=N&present`), or else the link that carries the
//! whole setup. The lesson's link does not start training: a room of phones would all train at
//! once, on battery, before their owners chose to (each presses Train, or the link gains
//! `&autotrain`).

use egui::{Color32, Rect, Sense, Ui, vec2};
use qrcode::{Color, QrCode};

/// The link a class should open: the lesson's own short link when a lesson is open (a setup in
/// the address makes a dense code), else `share_link` as it is. `share_link` is the page's
/// address with the setup in it.
pub fn class_link(share_link: &str, lesson: Option<usize>) -> String {
    match lesson {
        Some(index) => {
            let page = share_link.split(['?', '#']).next().unwrap_or(share_link);
            format!("{page}?lesson={}&present", index + 1)
        }
        None => share_link.to_string(),
    }
}

/// Draws `link`'s QR code `side` points square, dark on white with the quiet zone the standard
/// asks for; nothing where the link is too long for a code.
pub fn draw(ui: &mut Ui, link: &str, side: f32) -> Option<egui::Response> {
    let code = QrCode::new(link.as_bytes()).ok()?;
    let modules = code.width();
    let colours = code.to_colors();
    // Four modules of white on each side.
    let cell = side / (modules + 8) as f32;
    let (rect, response) = ui.allocate_exact_size(vec2(side, side), Sense::hover());
    let painter = ui.painter();
    painter.rect_filled(rect, 0.0, Color32::WHITE);
    let origin = rect.min + vec2(4.0 * cell, 4.0 * cell);
    for (i, colour) in colours.iter().enumerate() {
        if *colour == Color::Dark {
            let at = origin + vec2((i % modules) as f32 * cell, (i / modules) as f32 * cell);
            painter.rect_filled(Rect::from_min_size(at, vec2(cell, cell)), 0.0, Color32::BLACK);
        }
    }
    Some(response.on_hover_text(link))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lesson_gets_its_short_link_and_anything_else_the_setup_s() {
        let page = "https://example.org/qkv-lab/?compute=flex#setup=%7B%22preset%22%7D";
        assert_eq!(class_link(page, Some(0)), "https://example.org/qkv-lab/?lesson=1&present");
        assert_eq!(class_link(page, None), page);
        let code = QrCode::new(class_link(page, Some(4)).as_bytes()).unwrap();
        assert!(code.width() <= 37, "a code a phone reads from the back of a room: {} modules", code.width());
    }
}
