//! Controls a teacher hides from the class until they are introduced, as TensorFlow
//! Playground's links do: `?hide=setup,compute` in the browser, `--hide setup,compute` on the
//! desktop.

/// A control that a link can hide.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    /// The experiment setup (variants, model, training) in the side panel.
    Setup,
    /// The compute device menu in the top bar.
    Compute,
    /// The Playground / Samples / All variants tabs.
    Tabs,
    /// The lessons menu.
    Classroom,
    /// Export and import.
    Files,
    /// The theory section (the theory lesson's button stays in presentation mode).
    Theory,
    /// The lesson's steps.
    Steps,
}

impl Part {
    pub const ALL: [Part; 7] = [Part::Setup, Part::Compute, Part::Tabs, Part::Classroom, Part::Files, Part::Theory, Part::Steps];

    /// The name a link uses.
    pub fn name(self) -> &'static str {
        match self {
            Part::Setup => "setup",
            Part::Compute => "compute",
            Part::Tabs => "tabs",
            Part::Classroom => "classroom",
            Part::Files => "files",
            Part::Theory => "theory",
            Part::Steps => "steps",
        }
    }
}

/// A `hide=` list that names no control.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("hide= does not know \"{name}\": it takes a comma-separated list of {}", known())]
pub struct UnknownPart {
    pub name: String,
}

fn known() -> String {
    Part::ALL.map(Part::name).join(", ")
}

/// The controls hidden.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Hidden([bool; Part::ALL.len()]);

impl Hidden {
    /// Parses `setup,compute` (spaces and empty entries ignored).
    pub fn parse(list: &str) -> Result<Self, UnknownPart> {
        let mut hidden = Self::default();
        for name in list.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            let part = Part::ALL.into_iter().find(|p| p.name() == name).ok_or_else(|| UnknownPart { name: name.to_string() })?;
            hidden.0[part as usize] = true;
        }
        Ok(hidden)
    }

    pub fn hides(self, part: Part) -> bool {
        self.0[part as usize]
    }

    /// Shows `part` again (or hides it).
    pub fn set(&mut self, part: Part, hidden: bool) {
        self.0[part as usize] = hidden;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_list_hides_what_it_names_and_an_unknown_name_says_what_is_known() {
        let hidden = Hidden::parse("setup, compute,,tabs").unwrap();
        assert!(hidden.hides(Part::Setup) && hidden.hides(Part::Compute) && hidden.hides(Part::Tabs));
        assert!(!hidden.hides(Part::Files) && !hidden.hides(Part::Steps));
        assert_eq!(Hidden::parse("").unwrap(), Hidden::default());
        let error = Hidden::parse("setup,maps").unwrap_err();
        assert_eq!(error.name, "maps");
        assert!(error.to_string().contains("setup, compute, tabs, classroom, files, theory, steps"), "{error}");
    }
}
